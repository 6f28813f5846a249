package reap

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/cmd/af/internal/cmdtest"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/github/githubtest"
	"github.com/antifailure/af/github/report"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/runtime/runtimetest"
)

const token = "ghs_reaptest"

// fixture: a repository whose pull requests 1 (open), 2 (merged), 3 (closed) each have the
// action's comment and an environment, an environment whose TTL ran out, a manual one, and
// another repository's closed pull request the workflow's token cannot ask about.
func fixture(t *testing.T) (*githubtest.Server, *runtimetest.Fake) {
	t.Helper()
	s := githubtest.New(t, token)
	rep, err := report.NewReporter(s.Client(t, token, nil), "acme/shop", githubtest.BotLogin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt := &runtimetest.Fake{}
	for _, n := range []int{1, 2, 3} {
		f := &report.Facts{State: report.Ready, Environment: fmt.Sprintf("shop-pr-%d", n), Namespace: fmt.Sprintf("af-env-shop-pr-%d", n),
			Repository: "acme/shop", PullRequest: n, Commit: strings.Repeat("a", 40)}
		if _, err := rep.Comment(ctx, n, report.Comment(f), true); err != nil {
			t.Fatal(err)
		}
		rt.Envs = append(rt.Envs, afruntime.Environment{ID: f.Environment, Namespace: f.Namespace, Repository: "acme/shop", PullRequest: n})
	}
	s.SetPull(1, "open", strings.Repeat("a", 40), false)
	s.SetPull(2, "closed", strings.Repeat("a", 40), true)
	s.SetPull(3, "closed", strings.Repeat("a", 40), false)
	rt.Envs = append(rt.Envs,
		afruntime.Environment{ID: "demo", Namespace: "af-env-demo", Repository: "acme/shop", Expires: time.Now().Add(-time.Hour)},
		afruntime.Environment{ID: "keep", Namespace: "af-env-keep", Repository: "acme/shop"})
	return s, rt
}

func vars(s *githubtest.Server) map[string]string {
	return map[string]string{"AF_GITHUB_API_URL": s.URL, "GITHUB_TOKEN": token}
}

// --dry-run lists each removal with its reason, removes nothing and rewrites no comment.
func TestReapDryRun(t *testing.T) {
	s, rt := fixture(t)
	r := cmdtest.Exec(t, cmdtest.Env{Runtime: rt, Vars: vars(s)}, NewCmdReap, "--dry-run")
	if r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, r.ErrOut)
	}
	for _, want := range []string{
		"checked 5 environment(s); would remove 3",
		"af-env-demo", "its time to live ran out",
		"af-env-shop-pr-2", "acme/shop#2: the pull request was merged",
		"af-env-shop-pr-3", "acme/shop#3: the pull request was closed",
		"kept af-env-keep", "no pull request and no time to live",
		"watches: 5 absent\n", // each environment's watch read (the fake runs no probe)
	} {
		if !strings.Contains(r.Out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.Out)
		}
	}
	if strings.Contains(r.Out, "af-env-shop-pr-1") {
		t.Errorf("the open pull request's environment is listed:\n%s", r.Out)
	}
	for _, c := range rt.Calls() {
		if c.Method == "Down" {
			t.Fatalf("a dry run removed %s", c.Ref.Namespace)
		}
	}
	for _, n := range []int{2, 3} {
		if report.IsGone(s.Comments(n)[0].Body) {
			t.Fatalf("a dry run rewrote pull request %d's comment", n)
		}
	}
}

// Without --dry-run: the closed and expired ones go, their comments say why, -o json has the
// sweep; the open and manual ones stay.
func TestReap(t *testing.T) {
	s, rt := fixture(t)
	r := cmdtest.Exec(t, cmdtest.Env{Runtime: rt, Vars: vars(s), JSON: true}, NewCmdReap, "--repository", "acme/shop")
	if r.Err != nil {
		t.Fatalf("%v\n%s", r.Err, r.ErrOut)
	}
	var got struct {
		Sweep struct {
			Checked  int `json:"checked"`
			Removals []struct {
				Environment afruntime.Environment `json:"environment"`
				Reason      string                `json:"reason"`
			} `json:"removals"`
		} `json:"sweep"`
		Failed []string `json:"failed"`
	}
	if err := json.Unmarshal([]byte(r.Out), &got); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.Out)
	}
	if got.Sweep.Checked != 5 || len(got.Sweep.Removals) != 3 || len(got.Failed) != 0 {
		t.Fatalf("%+v", got)
	}
	left := map[string]bool{}
	for _, e := range rt.Envs {
		left[e.Namespace] = true
	}
	if len(left) != 2 || !left["af-env-shop-pr-1"] || !left["af-env-keep"] {
		t.Fatalf("left %v, want the open pull request's and the manual one", left)
	}
	for n, reason := range map[int]string{2: "merged", 3: "closed"} {
		if c := s.Comments(n); len(c) != 1 || !report.IsGone(c[0].Body) || !strings.Contains(c[0].Body, reason) {
			t.Fatalf("pull request %d's comment: %+v", n, c)
		}
	}
	if report.IsGone(s.Comments(1)[0].Body) {
		t.Fatal("the open pull request's comment was rewritten")
	}
}

// A removal the runtime refuses: the others still go, and the exit is AF-RUN's teardown error
// naming it.
func TestReapReportsWhatFailed(t *testing.T) {
	s, rt := fixture(t)
	rt.DownErr = failure.Newf(failure.NamespaceNotOurs, "namespace has no dev.antifailure.managed label")
	r := cmdtest.Exec(t, cmdtest.Env{Runtime: rt, Vars: vars(s)}, NewCmdReap)
	if failure.CodeOf(r.Err) != failure.TeardownIncomplete.Code || !strings.Contains(r.Err.Error(), "3 environment(s) could not be removed") {
		t.Fatalf("err %v\n%s", r.Err, r.Out)
	}
}

// Without GitHub credentials only the expired environment goes, and the run says so.
func TestReapWithoutCredentials(t *testing.T) {
	_, rt := fixture(t)
	r := cmdtest.Exec(t, cmdtest.Env{Runtime: rt}, NewCmdReap, "--dry-run")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if !strings.Contains(r.ErrOut, "no GitHub credentials") || !strings.Contains(r.Out, "would remove 1") || !strings.Contains(r.Out, "af-env-demo") {
		t.Fatalf("out:\n%s\nerr:\n%s", r.Out, r.ErrOut)
	}
}
