package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/github/delivery"
	"github.com/antifailure/af/github/report"
	afruntime "github.com/antifailure/af/runtime"
)

func get(h http.Handler, path string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w
}

// /healthz answers while the process runs; /readyz whether or not the cluster answers, without
// asking GitHub; /metrics has every metric the App promises. All three are the management
// handler's, none the webhook's.
func TestOperations(t *testing.T) {
	s := newStandin(t)
	s.preview(t, 3)
	s.preview(t, 8)
	expired := prEnv(8)
	expired.Expires = time.Now().Add(-time.Minute)
	c := newMemCluster(prEnv(3), expired)
	srv := newServer(t, c, s, nil)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if w := get(srv.Handler(), path); w.Code != http.StatusNotFound {
			t.Errorf("the webhook's handler answers %s: %d", path, w.Code)
		}
	}
	if w := get(srv.ManageHandler(), "/healthz"); w.Code != http.StatusOK {
		t.Fatalf("healthz %d", w.Code)
	}
	c.down = true
	if w := get(srv.ManageHandler(), "/readyz"); w.Code != http.StatusOK {
		t.Fatalf("readyz with the cluster away: %d %s", w.Code, w.Body.String())
	}
	c.down = false
	if s.TokensMinted() != 0 {
		t.Fatalf("readiness minted %d tokens: it asked GitHub", s.TokensMinted())
	}
	post(t, srv.Handler(), "m-3", s.closed(t, 3, false))
	deliver(srv.Handler(), "pull_request", "m-bad", "application/json", []byte("{}"), map[string]string{"X-Hub-Signature-256": "sha256=00"})
	waitFor(t, 10*time.Second, func() bool { return c.left() == 1 })
	if _, err := srv.Reaper.Sweep(context.Background()); err != nil { // removes the expired one
		t.Fatal(err)
	}
	drain(t, srv)
	_, remaining := s.RateLimitUsed()
	if remaining >= 5000 {
		t.Fatalf("the stand-in's remaining %d", remaining)
	}
	m := get(srv.ManageHandler(), "/metrics").Body.String()
	for _, want := range []string{
		`af_app_deliveries_total{action="closed",event="pull_request",result="queued"} 1`,
		`af_app_deliveries_total{action="",event="unknown",result="bad-signature"} 1`,
		`af_app_queue_depth 0`,
		`af_app_teardown_duration_seconds_count{result="ok"} 2`,
		`af_app_reaper_sweeps_total{result="ok"} 1`,
		`af_app_reaper_removals_total{reason="expired"} 1`,
		// The last X-RateLimit-Remaining GitHub sent: the stand-in's, after its last answer.
		fmt.Sprintf("af_app_github_rate_limit_remaining %d\n", remaining),
		`go_goroutines `,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// Every log line is JSON and names the delivery.
func TestLogsNameTheDelivery(t *testing.T) {
	s := newStandin(t)
	s.preview(t, 4)
	var buf bytes.Buffer // slog's handler serialises its writes; it is read after the workers end
	srv, err := New(Config{Secret: secret, Cluster: newMemCluster(prEnv(4)), GitHub: s.gh, Log: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	post(t, srv.Handler(), "log-4", s.closed(t, 4, false))
	drain(t, srv)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) < 4 {
		t.Fatalf("%d log lines:\n%s", len(lines), buf.String())
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %s", l)
		}
		if _, ok := m["delivery"]; !ok {
			t.Fatalf("no delivery id: %s", l)
		}
		if m["delivery"] != "log-4" {
			t.Fatalf("delivery %v, want log-4: %s", m["delivery"], l)
		}
	}
}

// blockingCluster holds every Down until released.
type blockingCluster struct {
	*memCluster
	started chan string
	release chan struct{}
}

func (b *blockingCluster) Down(ctx context.Context, ref afruntime.Ref) error {
	b.started <- ref.Namespace
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.memCluster.Down(ctx, ref)
}

// SIGTERM's path: Run's context ends while a teardown runs. New deliveries are refused, the
// running teardown finishes within the grace period, and Run returns.
func TestGracefulShutdown(t *testing.T) {
	s := newStandin(t)
	s.preview(t, 9)
	bc := &blockingCluster{memCluster: newMemCluster(prEnv(9)), started: make(chan string, 1), release: make(chan struct{})}
	srv, err := New(Config{Secret: secret, Cluster: bc, GitHub: s.gh, Grace: 20 * time.Second, ReapInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	url, stop := running(t, srv)
	stopped := make(chan error, 1)
	body := s.closed(t, 9, false)
	resp, err := http.DefaultClient.Do(signedRequest(url+"/webhook", "shutdown-9", body, delivery.Sign(secret, body)))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delivery: %d", resp.StatusCode)
	}
	<-bc.started // the teardown is running (the first sweep may have queued it too)
	go func() { stopped <- stop() }()
	time.Sleep(100 * time.Millisecond)
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Fatalf("still serving after shutdown began")
	}
	close(bc.release)
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within the grace period")
	}
	if bc.left() != 0 {
		t.Fatalf("the in-flight teardown did not finish")
	}
	if cs := s.Comments(9); len(cs) != 1 || !report.IsGone(cs[0].Body) {
		t.Fatalf("comment: %+v", cs)
	}
}

// cutAfterDown is a cluster whose Down, once the namespace is gone, hangs until cancelled:
// shutdown catches the teardown after the namespace went and before GitHub was told.
type cutAfterDown struct {
	Cluster
	removed chan struct{}
}

func (c *cutAfterDown) Down(ctx context.Context, ref afruntime.Ref) error {
	if err := c.Cluster.Down(ctx, ref); err != nil {
		return err
	}
	close(c.removed)
	<-ctx.Done()
	return ctx.Err()
}

// A teardown cut short by shutdown between the namespace's removal and the comment's rewrite:
// the reaper cannot see it any more (no namespace), so only its record says the comment and the
// deployment still need telling. The next run, with the same journal, resumes it at start.
func TestShutdownLeavesNothingUntold(t *testing.T) {
	s := newStandin(t)
	s.preview(t, 11)
	j := &MemoryJournal{} // stands for the ConfigMaps that outlive the pod
	mc := newMemCluster(prEnv(11))
	c := &cutAfterDown{Cluster: mc, removed: make(chan struct{})}
	first, err := New(Config{Secret: secret, Cluster: c, GitHub: s.gh, Grace: 200 * time.Millisecond, ReapInterval: time.Hour, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	url, stop := running(t, first)
	body := s.closed(t, 11, true)
	resp, err := http.DefaultClient.Do(signedRequest(url+"/webhook", "cut-11", body, delivery.Sign(secret, body)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	<-c.removed
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if mc.left() != 0 {
		t.Fatal("the namespace should be gone already")
	}
	if cs := s.Comments(11); len(cs) != 1 || report.IsGone(cs[0].Body) {
		t.Fatalf("the comment was rewritten before shutdown cut the teardown: %+v", cs)
	}
	recs, _ := j.List(context.Background())
	if len(recs) != 1 {
		t.Fatalf("records after shutdown: %v", recs)
	}

	second, err := New(Config{Secret: secret, Cluster: mc, GitHub: s.gh, ReapInterval: time.Hour, Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	_, stop2 := running(t, second)
	defer stop2()
	waitFor(t, 30*time.Second, func() bool {
		cs := s.Comments(11)
		return len(cs) == 1 && report.IsGone(cs[0].Body) && strings.Contains(cs[0].Body, report.ReasonMerged)
	})
	for _, d := range s.Deployments() {
		if d.Environment == report.Environment(11) && d.Statuses[len(d.Statuses)-1].State != "inactive" {
			t.Fatalf("deployment %s: %s", d.Environment, d.Statuses[len(d.Statuses)-1].State)
		}
	}
	waitFor(t, 10*time.Second, func() bool { r, _ := j.List(context.Background()); return len(r) == 0 })
}
