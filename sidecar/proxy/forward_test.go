package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/antifailure/af/internal/testnet"
	"github.com/antifailure/af/manifest"
	"github.com/antifailure/af/sidecar/decisionlog"
	"github.com/antifailure/af/sidecar/guard"
	"github.com/antifailure/af/sidecar/inbox"
	"github.com/antifailure/af/sidecar/policy"
)

// forwardWorld is the explicit proxy on loopback in front of an upstream host (a network
// namespace this test made) that counts the connections it accepts.
type forwardWorld struct {
	proxy    *Proxy
	log      *decisionlog.Log
	client   *http.Client
	base     string // http://<upstream address>
	accepted atomic.Int64
}

func newForwardWorld(t *testing.T, mux *http.ServeMux, idle time.Duration) *forwardWorld {
	t.Helper()
	n := testnet.New(t)
	up := n.Host("fwdup")
	w := &forwardWorld{base: "http://" + up.Addr.String()}
	srv := &http.Server{Handler: mux, IdleTimeout: idle, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			w.accepted.Add(1)
		}
	}}
	ln := up.Listen(":80")
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	pol, err := policy.New(manifest.Egress{Default: "block", Rules: []manifest.EgressRule{{CIDR: up.Addr.String() + "/32"}, {CIDR: "10.0.0.0/8"}}})
	if err != nil {
		t.Fatal(err)
	}
	w.log = decisionlog.New("fwd", 64, nil)
	w.proxy = New(Options{Policy: pol, Guard: guard.New(guard.Options{}), Log: w.log, Inbox: inbox.NewStore(8, 64)})
	front := httptest.NewServer(w.proxy.Explicit())
	t.Cleanup(func() { front.Close(); w.proxy.Close() })
	pu, _ := url.Parse(front.URL)
	w.client = &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}, Timeout: 10 * time.Second}
	t.Cleanup(w.client.CloseIdleConnections)
	return w
}

// last is the newest decision.
func (w *forwardWorld) last(t *testing.T) decisionlog.Entry {
	t.Helper()
	es := w.log.Query(decisionlog.Filter{})
	if len(es) == 0 {
		t.Fatal("no decision recorded")
	}
	return es[len(es)-1]
}

func get(t *testing.T, c *http.Client, method, u string, h http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, u, err)
	}
	return resp, string(b)
}

// TestFastPathKeepsUpstreamConnections: GETs one after another share one upstream connection,
// each is decided and recorded, and HEAD answers carry their length without a body.
func TestFastPathKeepsUpstreamConnections(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "6")
		_, _ = io.WriteString(w, "hello\n")
	})
	w := newForwardWorld(t, mux, time.Minute)
	for i := range 5 {
		resp, body := get(t, w.client, http.MethodGet, w.base+fmt.Sprintf("/n/%d", i), nil)
		if resp.StatusCode != 200 || body != "hello\n" {
			t.Fatalf("GET %d: %d %q", i, resp.StatusCode, body)
		}
		e := w.last(t)
		if !e.Allowed || e.Status != 200 || e.BytesIn != 6 || e.Path != fmt.Sprintf("/n/%d", i) || e.Via != ViaProxy {
			t.Fatalf("GET %d recorded as %+v", i, e)
		}
	}
	resp, body := get(t, w.client, http.MethodHead, w.base+"/", nil)
	if resp.StatusCode != 200 || body != "" || resp.ContentLength != 6 {
		t.Fatalf("HEAD: %d length %d body %q", resp.StatusCode, resp.ContentLength, body)
	}
	if got := w.accepted.Load(); got != 1 {
		t.Fatalf("six requests one after another opened %d upstream connections, want 1", got)
	}
}

// TestFastPathAfterTheUpstreamClosedItsConnection: a kept connection the upstream closed while
// idle is replaced, and the request still succeeds.
func TestFastPathAfterTheUpstreamClosedItsConnection(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	w := newForwardWorld(t, mux, 100*time.Millisecond)
	for i := range 3 {
		if resp, body := get(t, w.client, http.MethodGet, w.base+"/", nil); resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("GET %d: %d %q", i, resp.StatusCode, body)
		}
		time.Sleep(400 * time.Millisecond) // the upstream closes its idle side after 100 ms
	}
	if got := w.accepted.Load(); got != 3 {
		t.Fatalf("upstream accepted %d connections, want 3 (one per request, each closed while idle)", got)
	}
}

// TestFastPathHopByHopHeaders: headers meant for one connection (and those Connection names)
// reach neither side; the others do.
func TestFastPathHopByHopHeaders(t *testing.T) {
	seen := make(chan http.Header, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		h.Set("Host", r.Host)
		seen <- h
		w.Header().Set("Connection", "X-Up-Hop")
		w.Header().Set("X-Up-Hop", "1")
		w.Header().Set("X-Up-Kept", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
	})
	w := newForwardWorld(t, mux, time.Minute)
	resp, _ := get(t, w.client, http.MethodGet, w.base+"/", http.Header{
		"Connection": {"X-Secret"}, "X-Secret": {"1"}, "Proxy-Authorization": {"Basic eDp5"}, "X-Kept": {"1"},
	})
	h := <-seen
	if want := strings.TrimPrefix(w.base, "http://"); h.Get("Host") != want {
		t.Errorf("the upstream was told Host %q, want %q, as the client named it", h.Get("Host"), want)
	}
	for _, k := range []string{"X-Secret", "Proxy-Authorization", "Connection"} {
		if h.Get(k) != "" {
			t.Errorf("the upstream received %s: %q", k, h.Get(k))
		}
	}
	if h.Get("X-Kept") != "1" {
		t.Errorf("X-Kept was not passed on: %v", h)
	}
	if h.Get("User-Agent") != "Go-http-client/1.1" {
		t.Errorf("User-Agent %q, want the client's own", h.Get("User-Agent"))
	}
	for _, k := range []string{"X-Up-Hop", "Keep-Alive"} {
		if resp.Header.Get(k) != "" {
			t.Errorf("the client received %s: %q", k, resp.Header.Get(k))
		}
	}
	if resp.Header.Get("X-Up-Kept") != "1" {
		t.Errorf("X-Up-Kept was not passed back: %v", resp.Header)
	}
}

// TestFastPathStreamsAndTrailers: an answer of unknown length reaches the client piece by
// piece (the upstream writes its second event only after the client has read the first), and
// trailers arrive after the body.
func TestFastPathStreamsAndTrailers(t *testing.T) {
	got := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Trailer", "X-Sum")
		_, _ = io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			return // the client never saw the first event: the body ends short
		}
		_, _ = io.WriteString(w, "data: two\n\n")
		w.Header().Set("X-Sum", "2")
	})
	w := newForwardWorld(t, mux, time.Minute)
	resp, err := w.client.Get(w.base + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("first event: %q %v", line, err)
	}
	close(got)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "\ndata: two\n\n" {
		t.Fatalf("the rest: %q %v", rest, err)
	}
	if resp.Trailer.Get("X-Sum") != "2" {
		t.Fatalf("trailer X-Sum %q, want 2 (trailers %v)", resp.Trailer.Get("X-Sum"), resp.Trailer)
	}
}

// TestFastPathCutOffAnswer: when the upstream ends a chunked answer without its last chunk,
// the client's connection ends too (it cannot take the part for the whole: the sidecar would
// otherwise end its own chunked answer cleanly), and the decision is still recorded.
func TestFastPathCutOffAnswer(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "only ten..")
		w.(http.Flusher).Flush()
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	})
	w := newForwardWorld(t, mux, time.Minute)
	resp, err := w.client.Get(w.base + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Fatalf("the client read %q and no error from a cut-off answer", b)
	}
	e := w.last(t)
	if !e.Allowed || e.Status != 200 || e.BytesIn != 10 {
		t.Fatalf("recorded as %+v", e)
	}
}

// TestSlowPathCarriesBodies: requests with a body, or methods that are not safe to send twice,
// go through the general path and arrive whole.
func TestSlowPathCarriesBodies(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %d %s", r.Method, len(b), r.Host)
	})
	w := newForwardWorld(t, mux, time.Minute)
	body := strings.Repeat("x", 70000)
	for _, method := range []string{http.MethodPost, http.MethodPut} {
		req, _ := http.NewRequest(method, w.base+"/", strings.NewReader(body))
		resp, err := w.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != method+" 70000 "+strings.TrimPrefix(w.base, "http://") {
			t.Fatalf("%s: %d %q", method, resp.StatusCode, b)
		}
		if e := w.last(t); !e.Allowed || e.BytesOut != 70000 || e.Method != method {
			t.Fatalf("%s recorded as %+v", method, e)
		}
	}
	resp, b := get(t, w.client, http.MethodDelete, w.base+"/", nil)
	if resp.StatusCode != 200 || b != "DELETE 0 "+strings.TrimPrefix(w.base, "http://") {
		t.Fatalf("DELETE: %d %q", resp.StatusCode, b)
	}
}

// TestFastPathGuardRefuses: a destination the policy allows but the guard refuses (a private
// address) is answered 403 with the guard's reason, before any packet is sent.
func TestFastPathGuardRefuses(t *testing.T) {
	w := newForwardWorld(t, http.NewServeMux(), time.Minute)
	resp, body := get(t, w.client, http.MethodGet, "http://10.0.0.1/", nil)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "private") {
		t.Fatalf("GET a private address: %d %q", resp.StatusCode, body)
	}
	if e := w.last(t); e.Allowed || !strings.HasPrefix(e.Reason, "guard: ") {
		t.Fatalf("recorded as %+v", e)
	}
}
