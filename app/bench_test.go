package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/antifailure/af/github/delivery"
	"github.com/antifailure/af/github/githubtest"
)

// benchBodies are signed closed deliveries of real size (GitHub's own example payload, with
// the App's installation), one per pull request number.
func benchBodies(t testing.TB, n int) [][]byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(githubtest.PullRequestEvent(t, "closed", testRepo, 1, strings.Repeat("a", 40), false), &m); err != nil {
		t.Fatal(err)
	}
	m["installation"] = map[string]any{"id": testInstallation, "node_id": "MDIz"}
	out := make([][]byte, n)
	for i := range out {
		m["number"] = i + 1
		m["pull_request"].(map[string]any)["number"] = i + 1
		if i == 0 { // the changes keep it GitHub's shape: checked once, the rest differ by number only
			githubtest.ValidateEvent(t, "pull_request", "closed", m)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

// BenchmarkWebhook is one signed delivery through the App's handler (verify, decode, de-duplicate,
// queue) with teardowns queued behind it.
func BenchmarkWebhook(b *testing.B) {
	bodies := benchBodies(b, 1000)
	sigs := make([]string, len(bodies))
	for i, body := range bodies {
		sigs[i] = delivery.Sign(secret, body)
	}
	c := newMemCluster()
	c.downFor = 10 * time.Millisecond
	srv, err := New(Config{Secret: secret, Cluster: c, Workers: 4})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close(context.Background())
	h := srv.Handler()
	b.SetBytes(int64(len(bodies[0])))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % len(bodies)
		w := deliver(h, "pull_request", fmt.Sprintf("bench-%d", i), "application/json", bodies[k], map[string]string{"X-Hub-Signature-256": sigs[k]})
		if w.Code != http.StatusAccepted {
			b.Fatalf("status %d", w.Code)
		}
	}
}

// loadResult is one load run's figures.
type loadResult struct {
	name     string
	requests int
	errors   int
	rate     float64
	p50, p99 time.Duration
	max      time.Duration
}

// load sends signed deliveries to url from clients goroutines for d, each with its own delivery
// id, and measures each acknowledgement.
func load(t *testing.T, name, url string, bodies [][]byte, clients int, d time.Duration) loadResult {
	t.Helper()
	sigs := make([]string, len(bodies))
	for i, body := range bodies {
		sigs[i] = delivery.Sign(secret, body)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var next, errs atomic.Int64
	lat := make([][]time.Duration, clients)
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				i := next.Add(1)
				k := int(i) % len(bodies)
				req := signedRequest(url, fmt.Sprintf("load-%s-%d", name, i), bodies[k], sigs[k])
				t0 := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				lat[c] = append(lat[c], time.Since(t0))
				if err != nil || resp.StatusCode != http.StatusAccepted {
					errs.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	q := func(p float64) time.Duration { return all[min(len(all)-1, int(float64(len(all))*p))] }
	return loadResult{name: name, requests: len(all), errors: int(errs.Load()), rate: float64(len(all)) / el.Seconds(), p50: q(0.50), p99: q(0.99), max: all[len(all)-1]}
}

// TestBenchAppTable (make bench-app, AF_BENCH=1): the App's real server on loopback, signed
// deliveries of real size each with its own delivery id and teardowns queued behind them,
// next to a bare net/http handler that only reads the body (the ceiling), in the same run.
func TestBenchAppTable(t *testing.T) {
	if os.Getenv("AF_BENCH") != "1" {
		t.Skip("a load run: make bench-app")
	}
	bodies := benchBodies(t, 2000)
	const clients = 16
	d := 5 * time.Second
	serve := func(h http.Handler) (string, func()) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := &http.Server{Handler: h}
		go s.Serve(ln)
		return "http://" + ln.Addr().String() + "/webhook", func() { s.Close() }
	}
	bareURL, stopBare := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	}))
	bare := load(t, "bare net/http", bareURL, bodies, clients, d)
	stopBare()

	c := newMemCluster()
	for n := 1; n <= len(bodies); n++ {
		c.envs[prEnv(n).Namespace] = prEnv(n)
	}
	c.downFor = 20 * time.Millisecond // teardowns slower than deliveries: work queues up
	// JSON log lines as in production, written nowhere.
	srv, err := New(Config{Secret: secret, Cluster: c, Workers: 4, ReapInterval: time.Hour, Log: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	base, stop := running(t, srv)
	app := load(t, "af app serve", base+"/webhook", bodies, clients, d)
	depth := srv.Pool.Depth()
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	fmt.Printf("\nwebhook acknowledgements, %d clients, %s each, %d-byte signed pull_request closed payloads\n", clients, d, len(bodies[0]))
	fmt.Printf("%-16s %12s %10s %10s %10s %10s %8s\n", "server", "deliveries/s", "requests", "p50", "p99", "max", "errors")
	for _, r := range []loadResult{bare, app} {
		fmt.Printf("%-16s %12.0f %10d %10s %10s %10s %8d\n", r.name, r.rate, r.requests, r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond), r.max.Round(10*time.Microsecond), r.errors)
	}
	fmt.Printf("teardowns queued when the load stopped: %d; done by the end of shutdown: %d of %d pull requests (redeliveries of one merge in the queue)\n", depth, len(bodies)-c.left(), len(bodies))
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	fmt.Printf("goal af app serve >= 2000 deliveries/s: %s (%.0f; bare net/http %.0f)\n", met(app.rate >= 2000), app.rate, bare.rate)
	fmt.Printf("goal af app serve p99 <= 20ms: %s (%s; bare net/http %s)\n", met(app.p99 <= 20*time.Millisecond), app.p99.Round(10*time.Microsecond), bare.p99.Round(10*time.Microsecond))
	if app.errors > 0 || bare.errors > 0 {
		t.Fatalf("errors: app %d, bare %d", app.errors, bare.errors)
	}
	if depth == 0 {
		t.Fatalf("no teardown was queued behind the load: the run measured no queueing")
	}
}

// maxBody is a signed pull_request closed delivery as large as the App reads (a description
// padded until the body is just under MaxBody), and its signature.
func maxBody(b *testing.B) ([]byte, string) {
	b.Helper()
	var m map[string]any
	if err := json.Unmarshal(benchBodies(b, 1)[0], &m); err != nil {
		b.Fatal(err)
	}
	pr := m["pull_request"].(map[string]any)
	pr["body"] = ""
	small, err := json.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	pr["body"] = strings.Repeat("x", MaxBody-1024-len(small))
	body, err := json.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	if len(body) > MaxBody {
		b.Fatalf("%d bytes: over MaxBody", len(body))
	}
	return body, delivery.Sign(secret, body)
}

// BenchmarkWebhookConcurrentMaxBodies: 32 signed deliveries of the largest size the App reads
// (just under 25 MB) sent at once through the App's real handler, in-flight limit included,
// with the limit at its default (4) and effectively off (64). It reports the most heap in use
// seen while they were handled (runtime.ReadMemStats every 2ms), against the Deployment's
// 256Mi memory limit. Nothing is asserted about time or memory: the figure is the output.
func BenchmarkWebhookConcurrentMaxBodies(b *testing.B) {
	body, sig := maxBody(b)
	const clients = 32
	for _, limit := range []int{DefaultMaxInFlight, 64} {
		b.Run(fmt.Sprintf("max-in-flight=%d", limit), func(b *testing.B) {
			srv, err := New(Config{Secret: secret, Cluster: newMemCluster(), MaxInFlight: limit, InFlightWait: 10 * time.Minute, ReapInterval: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close(context.Background())
			h := srv.Handler()
			runtime.GC()
			var base runtime.MemStats
			runtime.ReadMemStats(&base)
			var peak uint64
			stop, sampled := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(sampled)
				var ms runtime.MemStats
				for {
					runtime.ReadMemStats(&ms)
					peak = max(peak, ms.HeapInuse)
					select {
					case <-stop:
						return
					case <-time.After(2 * time.Millisecond):
					}
				}
			}()
			var bad atomic.Int64
			var last atomic.Value
			b.SetBytes(int64(len(body)) * clients)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				for k := range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
						r.Header.Set("Content-Type", "application/json")
						r.Header.Set("X-GitHub-Event", "pull_request")
						r.Header.Set("X-GitHub-Delivery", fmt.Sprintf("big-%d-%d-%d", limit, i, k))
						r.Header.Set(delivery.SignatureHeader, sig)
						w := httptest.NewRecorder()
						h.ServeHTTP(w, r)
						if w.Code != http.StatusAccepted {
							bad.Add(1)
							last.Store(fmt.Sprintf("%d %s", w.Code, w.Body.String()))
						}
					}()
				}
				wg.Wait()
			}
			b.StopTimer()
			close(stop)
			<-sampled
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
			b.ReportMetric(float64(base.HeapInuse)/(1<<20), "base-heap-MB")
			if n := bad.Load(); n > 0 {
				b.Fatalf("%d of %d deliveries not accepted; the last: %v", n, clients*b.N, last.Load())
			}
		})
	}
}
