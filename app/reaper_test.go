package app

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/gate"
	"github.com/antifailure/af/github/githubtest"
	"github.com/antifailure/af/github/report"
	afruntime "github.com/antifailure/af/runtime"
)

// One sweep: closed pull requests and expired environments go (a dry run only lists them),
// open ones and manual ones without a TTL stay, and GitHub is asked once per repository.
func TestSweep(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	s := newStandin(t)
	for _, n := range []int{1, 2, 3, 4, 5} {
		s.preview(t, n)
	}
	s.SetPull(2, "closed", strings.Repeat("a", 40), true)  // merged; its webhook was lost
	s.SetPull(5, "closed", strings.Repeat("c", 40), false) // closed unmerged; its webhook was lost
	expired := prEnv(3)
	expired.Expires = now.Add(-time.Minute)
	manualTTL := afruntime.Environment{ID: "demo", Namespace: "af-env-demo", Repository: testRepo, Expires: now.Add(-time.Hour)}
	manual := afruntime.Environment{ID: "keep", Namespace: "af-env-keep", Repository: testRepo}
	future := prEnv(1)
	future.Expires = now.Add(time.Hour)
	c := newMemCluster(future, prEnv(2), expired, manualTTL, manual, prEnv(4), prEnv(5))

	dry := &Reaper{Cluster: c, GitHub: s.gh, DryRun: true, Now: func() time.Time { return now }}
	sw, err := dry.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range sw.Removals {
		got[r.Environment.Namespace] = r.Reason
	}
	if len(got) != 4 || got["af-env-shop-pr-2"] != report.ReasonMerged || got["af-env-shop-pr-5"] != report.ReasonClosed ||
		!strings.HasPrefix(got["af-env-shop-pr-3"], report.ReasonExpired) || !strings.HasPrefix(got["af-env-demo"], report.ReasonExpired) {
		t.Fatalf("removals %v", got)
	}
	if sw.Checked != 7 || len(sw.Kept) != 1 || sw.Kept[0].Environment.Namespace != "af-env-keep" {
		t.Fatalf("sweep %+v", sw)
	}
	if c.left() != 7 {
		t.Fatalf("a dry run removed something")
	}
	listed, read := 0, 0
	for _, call := range s.Calls() {
		switch call.Path {
		case "/repos/{owner}/{repo}/pulls":
			listed++
		case "/repos/{owner}/{repo}/pulls/{pull_number}":
			read++
		}
	}
	// One list for the repository's open pull requests; one read for each closed one removed
	// (merged or not), none for those open or expired.
	if listed != 1 || read != 2 {
		t.Fatalf("asked GitHub %d lists and %d pull requests, want 1 and 2", listed, read)
	}

	srv := newServer(t, c, s, nil)
	srv.Reaper.Now = func() time.Time { return now }
	if _, err := srv.Reaper.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	drain(t, srv)
	if c.left() != 3 {
		t.Fatalf("%d left, want 3 (the two open ones and the manual one)", c.left())
	}
	for n, reason := range map[int]string{2: report.ReasonMerged, 3: report.ReasonExpired, 5: report.ReasonClosed} {
		if cs := s.Comments(n); len(cs) != 1 || !report.IsGone(cs[0].Body) || !strings.Contains(cs[0].Body, reason) {
			t.Fatalf("pull request %d: %+v", n, cs)
		}
	}
	for _, n := range []int{1, 4} {
		if c.downs[fmt.Sprintf("af-env-shop-pr-%d", n)] != 0 {
			t.Fatalf("open pull request %d's environment was removed", n)
		}
	}
	if cs := s.Comments(1); report.IsGone(cs[0].Body) {
		t.Fatalf("the open pull request's comment was rewritten")
	}
}

// When GitHub cannot be asked about a repository, its environments stay and the sweep says so;
// expired ones still go.
func TestSweepWithoutGitHub(t *testing.T) {
	now := time.Now()
	expired := prEnv(3)
	expired.Expires = now.Add(-time.Second)
	c := newMemCluster(prEnv(2), expired)
	r := &Reaper{Cluster: c, DryRun: true}
	sw, err := r.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.Removals) != 1 || sw.Removals[0].Environment.Namespace != "af-env-shop-pr-3" || len(sw.Kept) != 1 {
		t.Fatalf("%+v", sw)
	}
	s := newStandin(t)
	s.SetApp(testAppID, testSlug, &s.key.PublicKey, testInstallation) // installed nowhere
	r = &Reaper{Cluster: c, GitHub: s.gh, DryRun: true}
	sw, err = r.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(sw.Errors) != 1 || !strings.Contains(sw.Errors[0], "404") || len(sw.Removals) != 1 {
		t.Fatalf("%+v", sw)
	}
}

// The pull request is told of containment breaking after the start: one failed "af
// containment" check run on its head commit when its environment's watch is seen escaped, none
// more while it stays so, and a successful one when it is contained again. A dry run tells
// nothing; an environment without a pull request is in the log and the metrics only.
func TestSweepTellsThePullRequest(t *testing.T) {
	s := newStandin(t)
	head := strings.Repeat("d", 40)
	s.SetPull(7, "open", head, false)
	manual := afruntime.Environment{ID: "keep", Namespace: "af-env-keep", Repository: testRepo}
	c := newMemCluster(prEnv(7), manual)
	escaped := &afruntime.Watch{State: gate.Escape, Detail: "NOT CONTAINED: at T the probe got out by tcp-public (198.51.100.10:443)"}
	c.watches = map[string]*afruntime.Watch{"af-env-shop-pr-7": escaped, "af-env-keep": escaped}
	containment := func() []githubtest.CheckRun {
		var out []githubtest.CheckRun
		for _, r := range s.CheckRuns() {
			if r.Name == report.ContainmentCheckName {
				out = append(out, r)
			}
		}
		return out
	}
	dry := &Reaper{Cluster: c, GitHub: s.gh, Report: ContainmentCheck{GitHub: s.gh}, DryRun: true}
	if _, err := dry.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := containment(); len(got) != 0 {
		t.Fatalf("a dry run wrote check runs: %+v", got)
	}
	r := &Reaper{Cluster: c, GitHub: s.gh, Report: ContainmentCheck{GitHub: s.gh}}
	for range 2 {
		if _, err := r.Sweep(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	got := containment()
	if len(got) != 1 || got[0].HeadSHA != head || got[0].Status != "completed" || got[0].Conclusion != "failure" ||
		!strings.Contains(got[0].Title, "Containment broken after the start: af-env-shop-pr-7") || !strings.Contains(got[0].Summary, "tcp-public (198.51.100.10:443)") {
		t.Fatalf("after two sweeps that saw it escaped: %+v", got)
	}
	c.mu.Lock()
	c.watches["af-env-shop-pr-7"] = &afruntime.Watch{State: gate.Contained, Detail: "contained: every route denied at T"}
	c.mu.Unlock()
	if _, err := r.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	got = containment()
	if len(got) != 2 || got[1].Conclusion != "success" || !strings.Contains(got[1].Title, "Contained again") {
		t.Fatalf("after it was contained again: %+v", got)
	}
}
