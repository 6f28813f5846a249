package app

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/antifailure/af/github/report"
)

// records reads the journal's teardowns by key.
func records(t *testing.T, j Journal) map[string]Teardown {
	t.Helper()
	recs, err := j.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Teardown{}
	for k, b := range recs {
		var td Teardown
		if err := json.Unmarshal(b, &td); err != nil {
			t.Fatal(err)
		}
		out[k] = td
	}
	return out
}

// A closed delivery for a pull request that is open again (reopened before the delivery was
// handled, or a delivery replayed or delayed) removes nothing and rewrites nothing; a delivery
// once it is really closed removes it.
func TestTeardownReadsTheStateFirst(t *testing.T) {
	s := newStandin(t)
	s.preview(t, 12) // open
	c := newMemCluster(prEnv(12))
	srv := newServer(t, c, s, nil)
	if code := post(t, srv.Handler(), "late-12", closedPayload(t, 12, false)); code != http.StatusAccepted {
		t.Fatalf("delivery: %d", code)
	}
	drain(t, srv)
	if c.downs["af-env-shop-pr-12"] != 0 || c.left() != 1 || patches(s) != 0 {
		t.Fatalf("an open pull request lost its environment: downs %v, %d left, %d edits", c.downs, c.left(), patches(s))
	}
	if recs := records(t, srv.cfg.Journal); len(recs) != 0 {
		t.Fatalf("records left: %v", recs)
	}

	srv = newServer(t, c, s, nil)
	post(t, srv.Handler(), "closed-12", s.closed(t, 12, false))
	drain(t, srv)
	if c.left() != 0 || patches(s) != 1 {
		t.Fatalf("%d left, %d edits", c.left(), patches(s))
	}
}

// reopened cancels a teardown that waits for its next attempt (its cluster failing): no
// further attempt is made and its record is gone; a reopened delivery with nothing waiting is
// acknowledged too.
func TestReopenedCancelsARetryingTeardown(t *testing.T) {
	s := newStandin(t)
	s.preview(t, 8)
	c := newMemCluster(prEnv(8))
	c.fail["af-env-shop-pr-8"] = 1000
	srv, err := New(Config{Secret: secret, Cluster: c, GitHub: s.gh, Base: 50 * time.Millisecond, Max: 50 * time.Millisecond, Attempts: 1000})
	if err != nil {
		t.Fatal(err)
	}
	post(t, srv.Handler(), "c-8", s.closed(t, 8, false))
	deadline := time.Now().Add(10 * time.Second)
	for c.downCount("af-env-shop-pr-8") < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the teardown was not retried")
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.SetPull(8, "open", strings.Repeat("a", 40), false)
	if code := post(t, srv.Handler(), "r-8", pullPayload(t, "reopened", 8)); code != http.StatusAccepted {
		t.Fatalf("reopened: %d", code)
	}
	time.Sleep(200 * time.Millisecond) // a retry would have come by now (every 50ms)
	n := c.downCount("af-env-shop-pr-8")
	time.Sleep(200 * time.Millisecond)
	if m := c.downCount("af-env-shop-pr-8"); m != n {
		t.Fatalf("attempts went on after reopened: %d then %d", n, m)
	}
	drain(t, srv)
	if recs := records(t, srv.cfg.Journal); len(recs) != 0 || c.left() != 1 {
		t.Fatalf("records %v, %d left", recs, c.left())
	}
	if code := post(t, srv.Handler(), "r-8-again", pullPayload(t, "reopened", 8)); code != http.StatusAccepted {
		t.Fatalf("reopened with nothing waiting: %d", code)
	}
}

// refusingJournal refuses every write.
type refusingJournal struct{ MemoryJournal }

func (*refusingJournal) Put(context.Context, string, []byte) error {
	return errors.New("the API server refused the ConfigMap")
}

// The intake records a closed delivery before it answers: a follower (a replica that does not
// lead) answers 202 with the record written and removes nothing itself; the leader resumes the
// record and tears the pull request down. A journal that cannot be written fails the delivery
// with 503, so it can be delivered again, and nothing is queued.
func TestDeliveryRecordedBeforeTheAnswer(t *testing.T) {
	s := newStandin(t)
	s.preview(t, 21)
	c := newMemCluster(prEnv(21))
	j := &MemoryJournal{}
	never := func(ctx context.Context, run func(context.Context)) error { <-ctx.Done(); return nil }
	follower, err := New(Config{Secret: secret, Cluster: c, GitHub: s.gh, Journal: j, Lead: never})
	if err != nil {
		t.Fatal(err)
	}
	if code := post(t, follower.Handler(), "d-21", s.closed(t, 21, false)); code != http.StatusAccepted {
		t.Fatalf("delivery to the follower: %d", code)
	}
	recs := records(t, j)
	if td, ok := recs[key(Teardown{Repository: testRepo, PullRequest: 21})]; !ok || td.Delivery != "d-21" || td.Recorded.IsZero() {
		t.Fatalf("records after the answer: %+v", recs)
	}
	time.Sleep(100 * time.Millisecond)
	if c.left() != 1 || follower.Pool.Depth() != 0 {
		t.Fatalf("the follower worked: %d left, depth %d", c.left(), follower.Pool.Depth())
	}
	drain(t, follower)

	leader := newServerJournal(t, c, s, j)
	if n, err := leader.Pool.Resume(t.Context()); err != nil || n != 1 {
		t.Fatalf("resume: %d %v", n, err)
	}
	drain(t, leader)
	if c.left() != 0 || patches(s) != 1 || len(records(t, j)) != 0 {
		t.Fatalf("%d left, %d edits, records %v", c.left(), patches(s), records(t, j))
	}

	s.preview(t, 22)
	c2 := newMemCluster(prEnv(22))
	broken := newServerJournal(t, c2, s, &refusingJournal{})
	if code := post(t, broken.Handler(), "d-22", s.closed(t, 22, false)); code != http.StatusServiceUnavailable {
		t.Fatalf("a delivery that could not be recorded: %d, want 503", code)
	}
	drain(t, broken)
	if c2.left() != 1 {
		t.Fatal("a delivery that was not recorded was acted on")
	}
}

func newServerJournal(t *testing.T, c Cluster, s *standin, j Journal) *Server {
	t.Helper()
	srv, err := New(Config{Secret: secret, Cluster: c, GitHub: s.gh, Journal: j, Workers: 2, Base: 10 * time.Millisecond, Max: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// A pull request GitHub no longer has (its repository deleted, or renamed away) can never be
// told: its environments are removed by their labels, and the teardown is dead-lettered at
// once: one attempt, a record marked dead that no resume runs again, the metric and a log
// line naming the pull request and the reason.
func TestGoneIsDeadLettered(t *testing.T) {
	s := newStandin(t)
	c := newMemCluster(prEnv(31)) // the stand-in has no pull request 31: 404
	var logs syncBuffer
	srv, err := New(Config{Secret: secret, Cluster: c, GitHub: s.gh, Base: 10 * time.Millisecond, Max: 10 * time.Millisecond, Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	post(t, srv.Handler(), "d-31", closedPayload(t, 31, false))
	drain(t, srv)
	if c.left() != 0 || c.downCount("af-env-shop-pr-31") != 1 {
		t.Fatalf("%d left, %d downs: the environment is removed once, by its labels", c.left(), c.downCount("af-env-shop-pr-31"))
	}
	recs := records(t, srv.cfg.Journal)
	td := recs[key(Teardown{Repository: testRepo, PullRequest: 31})]
	if td.Dead != "gone" || td.DeadAt.IsZero() {
		t.Fatalf("record %+v, want dead: gone", recs)
	}
	srv2 := newServerJournal(t, c, s, srv.cfg.Journal)
	if n, err := srv2.Pool.Resume(t.Context()); err != nil || n != 0 {
		t.Fatalf("a dead record was resumed: %d %v", n, err)
	}
	drain(t, srv2)
	if m := get(srv.ManageHandler(), "/metrics").Body.String(); !strings.Contains(m, `af_app_teardowns_dead_total{reason="gone"} 1`) {
		t.Errorf("/metrics lacks the dead letter:\n%s", grep(m, "af_app_teardown"))
	}
	if l := logs.String(); !strings.Contains(l, `"msg":"teardown dead-lettered: it will not be tried again"`) || !strings.Contains(l, `"pull_request":31`) || !strings.Contains(l, `"reason":"gone"`) {
		t.Errorf("no log line names the dead letter:\n%s", l)
	}
}

// A delivery from before the App was reinstalled carries an installation GitHub no longer
// has: the token is refused, the installation is looked up again, and the teardown completes.
func TestStaleInstallationLookedUpAgain(t *testing.T) {
	s := newStandin(t)
	s.preview(t, 41)
	c := newMemCluster(prEnv(41))
	srv := newServer(t, c, s, nil)
	body := strings.Replace(string(s.closed(t, 41, false)), `"installation":{"id":`, `"installation":{"id":9`, 1)
	if body == string(closedPayload(t, 41, false)) {
		t.Fatal("the payload has no installation to make stale")
	}
	post(t, srv.Handler(), "d-41", []byte(body))
	drain(t, srv)
	if c.left() != 0 || patches(s) != 1 {
		t.Fatalf("%d left, %d edits", c.left(), patches(s))
	}
	refused := 0
	for _, call := range s.Calls() {
		if call.Path == "/app/installations/{installation_id}/access_tokens" && call.Status == http.StatusNotFound {
			refused++
		}
	}
	if refused != 1 {
		t.Fatalf("%d tokens refused for the stale installation, want 1 (then looked up again): %v", refused, s.Calls())
	}
}

// A teardown past the pool's MaxAge is dead-lettered by the resume that finds it, and a dead
// record is deleted once MaxAge has passed again.
func TestMaxAge(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	j := &MemoryJournal{}
	ran := 0
	p := NewPool(1, func(context.Context, Teardown) error { ran++; return nil }, nil)
	p.Journal, p.Now, p.MaxAge = j, clock, 24*time.Hour
	var dead []Teardown
	p.OnDead = func(t Teardown) { dead = append(dead, t) }
	old := Teardown{Repository: testRepo, PullRequest: 5, Reason: report.ReasonClosed, Recorded: now.Add(-25 * time.Hour)}
	fresh := Teardown{Repository: testRepo, PullRequest: 6, Reason: report.ReasonClosed, Recorded: now.Add(-time.Hour)}
	for _, td := range []Teardown{old, fresh} {
		if err := p.Record(t.Context(), td); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := p.Resume(t.Context()); err != nil || n != 1 {
		t.Fatalf("resume: %d %v", n, err)
	}
	if len(dead) != 1 || dead[0].PullRequest != 5 || dead[0].Dead != "max-age" {
		t.Fatalf("dead %+v", dead)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	p.Close(ctx)
	if ran != 1 {
		t.Fatalf("%d teardowns ran, want the fresh one", ran)
	}
	if recs := records(t, j); len(recs) != 1 || recs[key(old)].Dead != "max-age" {
		t.Fatalf("records %+v", recs)
	}
	mu.Lock()
	now = now.Add(25 * time.Hour)
	mu.Unlock()
	p2 := NewPool(1, func(context.Context, Teardown) error { return nil }, nil)
	p2.Journal, p2.Now, p2.MaxAge = j, clock, 24*time.Hour
	if _, err := p2.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	p2.Close(ctx)
	if recs := records(t, j); len(recs) != 0 {
		t.Fatalf("a dead record outlived MaxAge: %+v", recs)
	}
}

// A sweep gives the operator the live environments by repository and the age of the oldest.
func TestSweepCountsEnvironments(t *testing.T) {
	s := newStandin(t)
	s.preview(t, 51)
	s.preview(t, 52)
	old := prEnv(51)
	old.Created = time.Now().Add(-3 * time.Hour)
	c := newMemCluster(old, prEnv(52))
	srv := newServer(t, c, s, nil)
	defer drain(t, srv)
	srv.sweep(t.Context())
	m := get(srv.ManageHandler(), "/metrics").Body.String()
	if !strings.Contains(m, `af_app_environments{repository="acme/shop"} 2`) {
		t.Errorf("/metrics lacks the live environments:\n%s", grep(m, "af_app_environment"))
	}
	if !strings.Contains(m, `af_app_environment_oldest_seconds{repository="acme/shop"} 10800`) {
		t.Errorf("/metrics lacks the oldest environment's age (3h):\n%s", grep(m, "af_app_environment"))
	}
}
