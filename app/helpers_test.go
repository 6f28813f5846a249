package app

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/antifailure/af/github/appclient"
	"github.com/antifailure/af/github/delivery"
	"github.com/antifailure/af/github/githubtest"
	"github.com/antifailure/af/github/report"
	afruntime "github.com/antifailure/af/runtime"
)

const (
	testRepo         = "acme/shop"
	testAppID        = 4242
	testSlug         = "af-preview"
	testInstallation = 77
	actionToken      = "ghs_action"
)

var (
	keyOnce sync.Once
	testKey *rsa.PrivateKey
)

// appKey is an RSA key made once per test binary, as GitHub issues them: PKCS#1 PEM.
func appKey(t testing.TB) (*rsa.PrivateKey, []byte) {
	t.Helper()
	keyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		testKey = k
	})
	return testKey, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(testKey)})
}

// standin is the GitHub stand-in with the App installed on testRepo, and the App's GitHub side
// pointed at it, recording rate-limit waits instead of sleeping.
type standin struct {
	*githubtest.Server
	gh  *appclient.Clients
	key *rsa.PrivateKey

	mu    sync.Mutex
	slept []time.Duration
}

func newStandin(t *testing.T) *standin {
	t.Helper()
	key, pemBytes := appKey(t)
	s := &standin{Server: githubtest.New(t, actionToken)}
	s.SetApp(testAppID, testSlug, &key.PublicKey, testInstallation, testRepo)
	gh, err := appclient.New(appclient.Options{APIURL: s.URL, AppID: testAppID, PrivateKey: pemBytes,
		Sleep: func(ctx context.Context, d time.Duration) error {
			s.mu.Lock()
			s.slept = append(s.slept, d)
			s.mu.Unlock()
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	s.gh, s.key = gh, key
	return s
}

func (s *standin) waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.slept...)
}

// preview makes what the action leaves on pull request n: its sticky comment (as
// github-actions[bot]) and a deployment of pr-n with a success status.
func (s *standin) preview(t *testing.T, n int) {
	t.Helper()
	c := s.Client(t, actionToken, nil)
	rep, err := report.NewReporter(c, testRepo, githubtest.BotLogin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f := &report.Facts{State: report.Ready, Environment: fmt.Sprintf("shop-pr-%d", n), Namespace: fmt.Sprintf("af-env-shop-pr-%d", n),
		Repository: testRepo, PullRequest: n, Commit: strings.Repeat("a", 40), URLs: map[string]string{"web": fmt.Sprintf("https://shop-pr-%d-web.preview.test", n)}}
	if _, err := rep.Comment(ctx, n, report.Comment(f), true); err != nil {
		t.Fatal(err)
	}
	id, err := rep.Deploy(ctx, n, strings.Repeat("a", 40), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.DeploymentStatus(ctx, id, "success", f.URLs["web"], "", "ready"); err != nil {
		t.Fatal(err)
	}
	s.SetPull(n, "open", strings.Repeat("a", 40), false)
}

// closed closes pull request n on the stand-in, as GitHub has it when it sends the delivery,
// and returns the delivery (closedPayload).
func (s *standin) closed(t *testing.T, n int, merged bool) []byte {
	t.Helper()
	s.SetPull(n, "closed", strings.Repeat("a", 40), merged)
	return closedPayload(t, n, merged)
}

// closedPayload is a real-shaped pull_request closed delivery for pull request n, from the
// App's installation, checked against GitHub's webhook schema.
func closedPayload(t *testing.T, n int, merged bool) []byte {
	t.Helper()
	return prPayload(t, "closed", n, merged)
}

// pullPayload is a real-shaped pull_request delivery of action (reopened, opened…) for pull
// request n, open.
func pullPayload(t *testing.T, action string, n int) []byte {
	t.Helper()
	return prPayload(t, action, n, false)
}

func prPayload(t *testing.T, action string, n int, merged bool) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(githubtest.PullRequestEvent(t, action, testRepo, n, strings.Repeat("a", 40), false), &m); err != nil {
		t.Fatal(err)
	}
	m["installation"] = map[string]any{"id": testInstallation, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uNzc="}
	pr, _ := m["pull_request"].(map[string]any)
	pr["merged"], pr["state"] = merged, "open"
	if action == "closed" {
		pr["state"] = "closed"
	}
	return githubtest.ValidateEvent(t, "pull_request", action, m)
}

// memCluster holds environments in memory, for the tests of what the App does around the
// cluster (the cluster tests use the real one). Down takes downFor, so overlaps would show.
type memCluster struct {
	mu      sync.Mutex
	envs    map[string]afruntime.Environment
	downs   map[string]int
	downFor time.Duration
	fail    map[string]int // namespace → Downs left to fail
	tries   map[string]int // namespace → Downs called, failed ones too
	down    bool
	watches map[string]*afruntime.Watch // namespace → what Watch answers (absent when unset)
	// meet, when > 0: each Down waits (up to 10 s) until meet Downs have been in flight at
	// once. A test that requires an overlap then gets one whenever the workers do run in
	// parallel, however loaded the machine; serial workers wait out the 10 s and show none.
	meet     int
	inFlight int
	met      chan struct{}
	metOnce  sync.Once
}

func newMemCluster(envs ...afruntime.Environment) *memCluster {
	c := &memCluster{envs: map[string]afruntime.Environment{}, downs: map[string]int{}, fail: map[string]int{}, tries: map[string]int{}, met: make(chan struct{})}
	for _, e := range envs {
		c.envs[e.Namespace] = e
	}
	return c
}

func prEnv(n int) afruntime.Environment {
	return afruntime.Environment{ID: fmt.Sprintf("shop-pr-%d", n), Namespace: fmt.Sprintf("af-env-shop-pr-%d", n), Repository: testRepo, PullRequest: n}
}

func (c *memCluster) Environments(_ context.Context, f afruntime.Filter) ([]afruntime.Environment, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return nil, fmt.Errorf("connection refused")
	}
	var out []afruntime.Environment
	for _, e := range c.envs {
		if f.Repository != "" && !strings.EqualFold(f.Repository, e.Repository) || f.PullRequest > 0 && f.PullRequest != e.PullRequest {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

func (c *memCluster) Down(_ context.Context, ref afruntime.Ref) error {
	c.mu.Lock()
	c.tries[ref.Namespace]++
	if c.fail[ref.Namespace] > 0 {
		c.fail[ref.Namespace]--
		c.mu.Unlock()
		return fmt.Errorf("the API server is not answering")
	}
	c.inFlight++
	meet := c.meet
	if meet > 0 && c.inFlight >= meet {
		c.metOnce.Do(func() { close(c.met) })
	}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inFlight--
		c.mu.Unlock()
	}()
	if meet > 0 {
		select {
		case <-c.met:
		case <-time.After(10 * time.Second):
		}
	}
	time.Sleep(c.downFor)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.downs[ref.Namespace]++
	delete(c.envs, ref.Namespace)
	return nil
}

func (c *memCluster) Reachable(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return fmt.Errorf("connection refused")
	}
	return nil
}

func (c *memCluster) Watch(_ context.Context, ref afruntime.Ref) (*afruntime.Watch, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return nil, fmt.Errorf("connection refused")
	}
	if w := c.watches[ref.Namespace]; w != nil {
		return w, nil
	}
	return &afruntime.Watch{State: afruntime.WatchAbsent, Detail: "no probe pod"}, nil
}

// downCount is how many times Down was called for namespace ns, failed calls too.
func (c *memCluster) downCount(ns string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tries[ns]
}

func (c *memCluster) left() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.envs)
}

// overlap is a Teardowner hook that fails the test when one namespace is handled by two
// workers at once.
type overlap struct {
	t    *testing.T
	mu   sync.Mutex
	busy map[string]bool
	max  int
	now  int
}

func newOverlap(t *testing.T) *overlap { return &overlap{t: t, busy: map[string]bool{}} }

func (o *overlap) hook(ns string, start bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if start {
		if o.busy[ns] {
			o.t.Errorf("namespace %s handled by two workers at once", ns)
		}
		o.busy[ns] = true
		o.now++
		o.max = max(o.max, o.now)
		return
	}
	delete(o.busy, ns)
	o.now--
}

// post delivers a signed payload to the server's handler.
func post(t *testing.T, h http.Handler, id string, body []byte) int {
	t.Helper()
	w := deliver(h, "pull_request", id, "application/json", body, map[string]string{"X-Hub-Signature-256": delivery.Sign(secret, body)})
	return w.Code
}

// signedRequest is a pull_request delivery to url as GitHub sends it.
func signedRequest(url, delivery string, body []byte, signature string) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", signature)
	return req
}

// running starts srv.Run on a loopback listener: its base URL, and a stop that ends Run and
// returns what it returned.
func running(t *testing.T, srv *Server) (string, func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	return "http://" + ln.Addr().String(), func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(60 * time.Second):
			return fmt.Errorf("Run did not return within 60s of its context ending")
		}
	}
}
