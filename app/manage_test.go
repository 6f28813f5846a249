package app

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/antifailure/af/github/appclient"
	"github.com/antifailure/af/github/delivery"
)

// syncBuffer is a bytes.Buffer safe for a logger and a test reading at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// countingJournal counts List calls and fails them while broken is set.
type countingJournal struct {
	MemoryJournal
	lists  atomic.Int32
	broken atomic.Bool
}

func (j *countingJournal) List(ctx context.Context) (map[string][]byte, error) {
	j.lists.Add(1)
	if j.broken.Load() {
		return nil, errors.New(`configmaps is forbidden: User "system:serviceaccount:af-system:af-app" cannot list resource "configmaps"`)
	}
	return j.MemoryJournal.List(ctx)
}

// /readyz answers on the journal alone: ready while it answers a read (a success remembered
// for 10s), not ready saying why when it does not; GitHub unreachable and the cluster's API
// away do not matter, and GitHub is never asked.
func TestReadyOnTheJournal(t *testing.T) {
	s := newStandin(t)
	for _, c := range []struct {
		name         string
		broken       bool
		clusterDown  bool
		probes       int
		status       int
		says         string
		lists        int32
		githubAnswer bool // false: the App's GitHub is an address nothing answers on
	}{
		{name: "journal answers", probes: 3, status: http.StatusOK, says: "ready", lists: 1, githubAnswer: true},
		{name: "journal answers, GitHub unreachable, cluster away", clusterDown: true, probes: 2, status: http.StatusOK, says: "ready", lists: 1},
		{name: "journal refuses", broken: true, probes: 2, status: http.StatusServiceUnavailable, says: "cannot list resource", lists: 2, githubAnswer: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			gh := s.gh
			if !c.githubAnswer {
				_, pemBytes := appKey(t)
				var err error
				if gh, err = appclient.New(appclient.Options{APIURL: "http://127.0.0.1:1", AppID: testAppID, PrivateKey: pemBytes}); err != nil {
					t.Fatal(err)
				}
			}
			j := &countingJournal{}
			j.broken.Store(c.broken)
			mc := newMemCluster()
			mc.down = c.clusterDown
			minted := s.TokensMinted()
			srv, err := New(Config{Secret: secret, Cluster: mc, GitHub: gh, Journal: j, ReapInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close(context.Background())
			for i := range c.probes {
				w := get(srv.ManageHandler(), "/readyz")
				if w.Code != c.status || !strings.Contains(w.Body.String(), c.says) {
					t.Fatalf("probe %d: %d %q, want %d saying %q", i, w.Code, w.Body.String(), c.status, c.says)
				}
			}
			if got := j.lists.Load(); got != c.lists {
				t.Errorf("%d probes read the journal %d times, want %d (a success is remembered, a failure is not)", c.probes, got, c.lists)
			}
			if s.TokensMinted() != minted {
				t.Errorf("readiness asked GitHub for a token")
			}
		})
	}
	// A journal that comes back makes the App ready again at the next probe.
	j := &countingJournal{}
	j.broken.Store(true)
	srv, err := New(Config{Secret: secret, Cluster: newMemCluster(), Journal: j, ReapInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	if w := get(srv.ManageHandler(), "/readyz"); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("broken journal: %d", w.Code)
	}
	j.broken.Store(false)
	if w := get(srv.ManageHandler(), "/readyz"); w.Code != http.StatusOK {
		t.Fatalf("journal back: %d %s", w.Code, w.Body.String())
	}
}

// The dependency check sets af_app_dependency_up for GitHub and the cluster and logs a line
// only when a dependency's state changes, with the error.
func TestManageDependencyChecks(t *testing.T) {
	s := newStandin(t)
	mc := newMemCluster()
	var buf syncBuffer
	srv, err := New(Config{Secret: secret, Cluster: mc, GitHub: s.gh, ReapInterval: time.Hour, Log: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	last := map[string]bool{}
	lines := func(sub string) int { return strings.Count(buf.String(), sub) }
	for i, step := range []struct {
		clusterDown  bool
		github       string
		cluster      string
		ups, downs   int // log lines so far
		refusedLines int
	}{
		{clusterDown: false, github: "1", cluster: "1", ups: 2, downs: 0},
		{clusterDown: true, github: "1", cluster: "0", ups: 2, downs: 1, refusedLines: 1},
		{clusterDown: true, github: "1", cluster: "0", ups: 2, downs: 1, refusedLines: 1}, // no change: no line
		{clusterDown: false, github: "1", cluster: "1", ups: 3, downs: 1, refusedLines: 1},
	} {
		mc.mu.Lock()
		mc.down = step.clusterDown
		mc.mu.Unlock()
		srv.checkDependencies(context.Background(), last)
		m := get(srv.ManageHandler(), "/metrics").Body.String()
		for _, want := range []string{`af_app_dependency_up{dependency="github"} ` + step.github, `af_app_dependency_up{dependency="cluster"} ` + step.cluster} {
			if !strings.Contains(m, want) {
				t.Errorf("step %d: /metrics lacks %q:\n%s", i, want, grep(m, "dependency_up"))
			}
		}
		if got := lines(`"msg":"dependency up"`); got != step.ups {
			t.Errorf("step %d: %d up lines, want %d:\n%s", i, got, step.ups, buf.String())
		}
		if got := lines(`"msg":"dependency down`); got != step.downs {
			t.Errorf("step %d: %d down lines, want %d:\n%s", i, got, step.downs, buf.String())
		}
		if got := lines("connection refused"); got != step.refusedLines {
			t.Errorf("step %d: the error was logged %d times, want %d", i, got, step.refusedLines)
		}
	}
	// Run starts the checker with the server and stops it with its context.
	_, stop := running(t, srv)
	waitFor(t, 10*time.Second, func() bool { return lines(`"msg":"dependency up"`) == 5 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// With Config.Manage, Run serves the management routes there and only the webhook on the
// webhook's listener; without it, both on the one listener. Both listeners stop at shutdown.
func TestManageListener(t *testing.T) {
	for _, separate := range []bool{true, false} {
		name := "one listener"
		if separate {
			name = "separate"
		}
		t.Run(name, func(t *testing.T) {
			cfg := Config{Secret: secret, Cluster: newMemCluster(), ReapInterval: time.Hour}
			var manageURL string
			if separate {
				ml, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				cfg.Manage, manageURL = ml, "http://"+ml.Addr().String()
			}
			srv, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			url, stop := running(t, srv)
			if !separate {
				manageURL = url
			}
			status := func(method, u string, body []byte) int {
				t.Helper()
				var r io.Reader
				if body != nil {
					r = bytes.NewReader(body)
				}
				req, _ := http.NewRequest(method, u, r)
				if body != nil {
					req.Header.Set("X-GitHub-Event", "ping")
					req.Header.Set("X-GitHub-Delivery", "listener-ping")
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set(delivery.SignatureHeader, delivery.Sign(secret, body))
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("%s %s: %v", method, u, err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return resp.StatusCode
			}
			if got := status(http.MethodPost, url+"/webhook", pingBody); got != http.StatusAccepted {
				t.Errorf("webhook: %d", got)
			}
			for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
				if got := status(http.MethodGet, manageURL+p, nil); got != http.StatusOK {
					t.Errorf("management %s: %d", p, got)
				}
				if got := status(http.MethodGet, url+p, nil); separate && got != http.StatusNotFound {
					t.Errorf("the webhook's listener answers %s: %d", p, got)
				}
			}
			if got := status(http.MethodPost, manageURL+"/webhook", pingBody); separate && got == http.StatusAccepted {
				t.Errorf("the management listener took a delivery")
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			for _, u := range []string{url + "/webhook", manageURL + "/healthz"} {
				c := http.Client{Timeout: 2 * time.Second}
				if resp, err := c.Get(u); err == nil {
					resp.Body.Close()
					t.Errorf("%s still answers after Run returned", u)
				}
			}
		})
	}
}
