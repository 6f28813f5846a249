package app

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/antifailure/af/github/appclient"
	"github.com/antifailure/af/github/githubtest"
	"github.com/antifailure/af/github/report"
	afruntime "github.com/antifailure/af/runtime"
)

// newServer is the App over cluster and the stand-in, with a fast backoff.
func newServer(t *testing.T, c Cluster, s *standin, hook func(string, bool)) *Server {
	t.Helper()
	srv, err := New(Config{Secret: secret, Cluster: c, GitHub: s.gh, Workers: 8, Base: 10 * time.Millisecond, Max: 100 * time.Millisecond, Hook: hook})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func drain(t *testing.T, srv *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if left := srv.Close(ctx); left != 0 {
		t.Fatalf("%d teardowns left undone", left)
	}
}

// patches counts the comment edits the stand-in took.
func patches(s *standin) int {
	n := 0
	for _, c := range s.Calls() {
		if c.Method == http.MethodPatch && c.Path == "/repos/{owner}/{repo}/issues/comments/{comment_id}" && c.Status == http.StatusOK {
			n++
		}
	}
	return n
}

// A real-shaped closed delivery through the App: the environment goes, the action's comment
// is rewritten by the App (installation token minted through ghinstallation), the deployment
// is inactive. The same delivery again does nothing more.
func TestClosedDeliveryTearsDown(t *testing.T) {
	s := newStandin(t)
	s.preview(t, 12)
	c := newMemCluster(prEnv(12), prEnv(13))
	srv := newServer(t, c, s, nil)
	body := s.closed(t, 12, true)
	for i := 0; i < 3; i++ {
		if code := post(t, srv.Handler(), "delivery-12", body); code != http.StatusAccepted {
			t.Fatalf("delivery %d: %d", i, code)
		}
	}
	drain(t, srv)
	if c.downs["af-env-shop-pr-12"] != 1 || c.downs["af-env-shop-pr-13"] != 0 || c.left() != 1 {
		t.Fatalf("downs %v, %d left", c.downs, c.left())
	}
	cs := s.Comments(12)
	if len(cs) != 1 || !report.IsGone(cs[0].Body) || !strings.Contains(cs[0].Body, report.ReasonMerged) || !strings.Contains(cs[0].Body, "af-env-shop-pr-12") {
		t.Fatalf("comments: %+v", cs)
	}
	if cs[0].Login != githubtest.BotLogin {
		t.Fatalf("the comment changed author: %s", cs[0].Login)
	}
	if n := patches(s); n != 1 {
		t.Fatalf("%d comment edits, want 1", n)
	}
	ds := s.Deployments()
	if len(ds) != 1 || ds[0].Statuses[len(ds[0].Statuses)-1].State != "inactive" {
		t.Fatalf("deployments: %+v", ds)
	}
	if s.TokensMinted() != 1 {
		t.Fatalf("%d installation tokens minted, want 1 (cached)", s.TokensMinted())
	}
}

// 100 pull requests closed at once, each delivered three times: every environment removed, no
// namespace handled by two workers at once, every comment rewritten exactly once, every
// deployment inactive, and never two GitHub mutations in flight for the repository.
func TestHundredClosedAtOnce(t *testing.T) {
	s := newStandin(t)
	var envs []afruntime.Environment
	for n := 1; n <= 100; n++ {
		s.preview(t, n)
		envs = append(envs, prEnv(n))
	}
	s.Delay = time.Millisecond // widen any race between two mutations
	c := newMemCluster(envs...)
	c.downFor = 5 * time.Millisecond
	c.meet = 2 // the first teardowns wait for a second one: parallel workers overlap, under any load
	ov := newOverlap(t)
	srv := newServer(t, c, s, ov.hook)
	bodies := make([][]byte, 101)
	for n := 1; n <= 100; n++ {
		bodies[n] = s.closed(t, n, n%2 == 0)
	}
	before := patches(s)
	var wg sync.WaitGroup
	// Rounds 0 and 1 are GitHub's redelivery (one id); round 2 is another delivery for the
	// same pull request (another id), which must merge into the queued one or wait for the
	// running one, never run beside it.
	for round := 0; round < 3; round++ {
		for n := 1; n <= 100; n++ {
			id := fmt.Sprintf("d-%d", n)
			if round == 2 {
				id = fmt.Sprintf("again-%d", n)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if code := post(t, srv.Handler(), id, bodies[n]); code != http.StatusAccepted {
					t.Errorf("pull request %d: %d", n, code)
				}
			}()
		}
	}
	wg.Wait()
	drain(t, srv)
	if c.left() != 0 {
		t.Fatalf("%d environments left", c.left())
	}
	for ns, n := range c.downs {
		if n != 1 {
			t.Errorf("%s removed %d times", ns, n)
		}
	}
	if ov.max < 2 {
		t.Errorf("at most %d teardowns ran at once: the workers did not run in parallel", ov.max)
	}
	if got := patches(s) - before; got != 100 {
		t.Fatalf("%d comment edits, want exactly 100", got)
	}
	for n := 1; n <= 100; n++ {
		cs := s.Comments(n)
		if len(cs) != 1 || !report.IsGone(cs[0].Body) {
			t.Fatalf("pull request %d: %+v", n, cs)
		}
	}
	for _, d := range s.Deployments() {
		if st := d.Statuses[len(d.Statuses)-1].State; st != "inactive" {
			t.Fatalf("%s: %s", d.Environment, st)
		}
	}
	if m := s.MaxConcurrentMutations()[testRepo]; m != 1 {
		t.Fatalf("%d mutations of %s in flight at once, want 1", m, testRepo)
	}
}

// GitHub answers 403 with remaining 0, then a secondary limit with retry-after, then 429: the
// App waits as told each time and the teardown completes.
func TestRateLimitsWaitedOut(t *testing.T) {
	s := newStandin(t)
	s.preview(t, 5)
	s.preview(t, 6)
	c := newMemCluster(prEnv(5), prEnv(6))
	srv := newServer(t, c, s, nil)
	s.Limit("primary", "secondary", "429")
	for _, n := range []int{5, 6} {
		if code := post(t, srv.Handler(), fmt.Sprintf("rl-%d", n), s.closed(t, n, false)); code != http.StatusAccepted {
			t.Fatal(code)
		}
	}
	drain(t, srv)
	w := s.waits()
	if len(w) != 3 {
		t.Fatalf("waited %v, want three waits", w)
	}
	if w[0] < 500*time.Millisecond || w[0] > 3*time.Second || w[1] != time.Second || w[2] != time.Second {
		t.Fatalf("waits %v: want until the reset (about 1-2s), then retry-after 1s twice", w)
	}
	for _, n := range []int{5, 6} {
		if cs := s.Comments(n); len(cs) != 1 || !report.IsGone(cs[0].Body) {
			t.Fatalf("pull request %d: %+v", n, cs)
		}
	}
	if m := s.MaxConcurrentMutations()[testRepo]; m != 1 {
		t.Fatalf("%d mutations in flight at once", m)
	}
	limited := 0
	for _, call := range s.Calls() {
		if call.Status == http.StatusTooManyRequests || call.Status == http.StatusForbidden {
			limited++
		}
	}
	if limited != 3 {
		t.Fatalf("%d refused calls, want 3", limited)
	}
}

// A cluster that fails at first is retried with backoff until the teardown completes; the
// comment is rewritten once.
func TestClusterErrorsRetried(t *testing.T) {
	s := newStandin(t)
	s.preview(t, 8)
	c := newMemCluster(prEnv(8))
	c.fail["af-env-shop-pr-8"] = 3
	srv := newServer(t, c, s, nil)
	post(t, srv.Handler(), "retry-8", s.closed(t, 8, false))
	drain(t, srv)
	if c.left() != 0 || patches(s) != 1 {
		t.Fatalf("%d left, %d edits", c.left(), patches(s))
	}
}

// Credentials that are not the App's (another App id): GitHub refuses the JWT; the App stays
// ready (deliveries are still accepted and recorded), and the dependency check says why, in
// the gauge and the log.
func TestWrongAppReadyDependencyDown(t *testing.T) {
	s := newStandin(t)
	_, pemBytes := appKey(t)
	gh, err := appclient.New(appclient.Options{APIURL: s.URL, AppID: testAppID + 1, PrivateKey: pemBytes})
	if err != nil {
		t.Fatal(err)
	}
	c := newMemCluster()
	var buf syncBuffer
	srv, err := New(Config{Secret: secret, Cluster: c, GitHub: gh, Log: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer drain(t, srv)
	if w := get(srv.ManageHandler(), "/readyz"); w.Code != http.StatusOK {
		t.Fatalf("readyz: %d %s", w.Code, w.Body.String())
	}
	srv.checkDependencies(t.Context(), map[string]bool{})
	m := get(srv.ManageHandler(), "/metrics").Body.String()
	for _, want := range []string{`af_app_dependency_up{dependency="github"} 0`, `af_app_dependency_up{dependency="cluster"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if l := buf.String(); !strings.Contains(l, "AF-GH-003") || !strings.Contains(l, "iss") || !strings.Contains(l, `"dependency":"github"`) {
		t.Fatalf("the log does not say why GitHub is down:\n%s", l)
	}
}
