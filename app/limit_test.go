package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/github/delivery"
)

// gatedBody is a request body that gives nothing until open is closed: a slow sender.
type gatedBody struct {
	r    io.Reader
	open <-chan struct{}
}

func (g *gatedBody) Read(p []byte) (int, error) {
	<-g.open
	return g.r.Read(p)
}

var pingBody = []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`)

// pingRequest is a signed ping delivery whose body arrives when open is closed (nil: at once).
func pingRequest(ctx context.Context, id string, open <-chan struct{}) *http.Request {
	var body io.Reader = strings.NewReader(string(pingBody))
	if open != nil {
		body = &gatedBody{r: body, open: open}
	}
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/webhook", body)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-GitHub-Event", "ping")
	r.Header.Set("X-GitHub-Delivery", id)
	r.Header.Set(delivery.SignatureHeader, delivery.Sign(secret, pingBody))
	return r
}

// serveAsync runs h on r in a goroutine; the channel gets the answer.
func serveAsync(h http.Handler, r *http.Request) <-chan *httptest.ResponseRecorder {
	out := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		out <- w
	}()
	return out
}

func limitedServer(t *testing.T, wait time.Duration) *Server {
	t.Helper()
	srv, err := New(Config{Secret: secret, Cluster: newMemCluster(), MaxInFlight: 2, InFlightWait: wait, ReapInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(context.Background()) })
	return srv
}

// With MaxInFlight 2 and two slow bodies being read, a third request waits: it gets 503 with
// Retry-After once InFlightWait (or its own context) ran out, counted as busy; or, when a slot
// is freed within the wait, it goes through. The slow ones finish normally.
func TestLimitInFlight(t *testing.T) {
	for _, c := range []struct {
		name    string
		wait    time.Duration
		cancel  bool // the third request's context ends while it waits
		free    bool // one slow body is released while the third waits
		status  int
		retry   string
		busyCnt int
	}{
		{name: "no slot within the wait", wait: 300 * time.Millisecond, status: http.StatusServiceUnavailable, retry: "1", busyCnt: 1},
		{name: "the request's own context ends first", wait: time.Minute, cancel: true, status: http.StatusServiceUnavailable, retry: "60", busyCnt: 1},
		{name: "a slot freed lets it through", wait: time.Minute, free: true, status: http.StatusAccepted},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := limitedServer(t, c.wait)
			h := srv.Handler()
			gates := []chan struct{}{make(chan struct{}), make(chan struct{})}
			var slow []<-chan *httptest.ResponseRecorder
			for i, g := range gates {
				slow = append(slow, serveAsync(h, pingRequest(context.Background(), fmt.Sprintf("slow-%d", i), g)))
			}
			waitFor(t, 10*time.Second, func() bool { return srv.limit.inFlight() == 2 })
			if m := get(srv.ManageHandler(), "/metrics").Body.String(); !strings.Contains(m, "af_app_webhook_in_flight 2\n") {
				t.Errorf("in-flight gauge with both slots taken:\n%s", grep(m, "af_app_webhook_in_flight"))
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			third := serveAsync(h, pingRequest(ctx, "third", nil))
			select {
			case w := <-third:
				t.Fatalf("the third request did not wait for a slot: %d %s", w.Code, w.Body.String())
			case <-time.After(100 * time.Millisecond):
			}
			if c.cancel {
				cancel()
			}
			if c.free {
				close(gates[0])
				gates[0] = nil
			}
			w := <-third
			if w.Code != c.status {
				t.Fatalf("third: %d %s, want %d", w.Code, w.Body.String(), c.status)
			}
			if c.status == http.StatusServiceUnavailable {
				if got := w.Header().Get("Retry-After"); got != c.retry {
					t.Errorf("Retry-After %q, want %q", got, c.retry)
				}
				if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") || !strings.Contains(w.Body.String(), "busy") {
					t.Errorf("a 503 of %s: %q", ct, w.Body.String())
				}
			}
			for i, g := range gates {
				if g != nil {
					close(g)
				}
				if w := <-slow[i]; w.Code != http.StatusAccepted {
					t.Errorf("slow delivery %d: %d %s", i, w.Code, w.Body.String())
				}
			}
			m := get(srv.ManageHandler(), "/metrics").Body.String()
			want := []string{"af_app_webhook_in_flight 0\n"}
			if c.busyCnt > 0 {
				want = append(want, fmt.Sprintf(`af_app_deliveries_total{action="",event="unknown",result="busy"} %d`, c.busyCnt))
			} else if strings.Contains(m, `result="busy"`) {
				t.Errorf("a request that got a slot was counted busy:\n%s", grep(m, "busy"))
			}
			for _, s := range want {
				if !strings.Contains(m, s) {
					t.Errorf("/metrics lacks %q:\n%s", s, grep(m, "af_app_"))
				}
			}
		})
	}
}

// The limit is the webhook's only: with every slot taken, the management routes answer, on
// their own handler and beside the webhook (Config.Manage nil).
func TestLimitNotOnManagement(t *testing.T) {
	srv := limitedServer(t, time.Minute)
	gate := make(chan struct{})
	var slow []<-chan *httptest.ResponseRecorder
	for i := range 2 {
		slow = append(slow, serveAsync(srv.Handler(), pingRequest(context.Background(), fmt.Sprintf("hold-%d", i), gate)))
	}
	waitFor(t, 10*time.Second, func() bool { return srv.limit.inFlight() == 2 })
	for name, h := range map[string]http.Handler{"ManageHandler": srv.ManageHandler(), "one listener": srv.publicHandler()} {
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			done := serveAsync(h, httptest.NewRequest(http.MethodGet, path, nil))
			select {
			case w := <-done:
				if w.Code != http.StatusOK {
					t.Errorf("%s %s: %d", name, path, w.Code)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s %s waited for a webhook slot", name, path)
			}
		}
	}
	close(gate)
	for _, s := range slow {
		if w := <-s; w.Code != http.StatusAccepted {
			t.Errorf("held delivery: %d", w.Code)
		}
	}
}

// grep is the lines of s that contain sub (failure messages).
func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
