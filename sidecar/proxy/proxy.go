// Package proxy is the sidecar's way out: the explicit HTTP proxy (absolute-form requests and
// CONNECT), and the transparent listeners that catch clients ignoring their proxy settings,
// deciding plain HTTP by its Host header and TLS by the server name in its ClientHello, which
// is peeked, never terminated, then spliced. Every request or tunnel is decided by the egress
// policy, connected only through the guard, and recorded in the decision log; captured plain
// HTTP is answered locally and kept in the inbox.
package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/antifailure/af/sidecar/decisionlog"
	"github.com/antifailure/af/sidecar/guard"
	"github.com/antifailure/af/sidecar/inbox"
	"github.com/antifailure/af/sidecar/policy"
)

// Via values in the decision log.
const (
	ViaProxy       = "proxy"
	ViaTransparent = "transparent"
)

// Proxy decides and carries outbound connections.
type Proxy struct {
	policy *policy.Policy
	guard  *guard.Guard
	log    *decisionlog.Log
	inbox  *inbox.Store

	idle      time.Duration
	handshake time.Duration

	transport *http.Transport
	rp        *httputil.ReverseProxy
	ups       *upstreams
	stopSweep chan struct{}
	sweepOnce sync.Once

	mu      sync.Mutex
	tunnels map[net.Conn]struct{}
	closing bool
}

// Options configure a Proxy.
type Options struct {
	Policy           *policy.Policy
	Guard            *guard.Guard
	Log              *decisionlog.Log
	Inbox            *inbox.Store
	IdleTimeout      time.Duration
	HandshakeTimeout time.Duration
}

type ctxKey struct{}

// reqState travels with a forwarded request, so the transport and the error handler can
// record what happened.
type reqState struct {
	refused *guard.Refused
}

// New returns a Proxy.
func New(o Options) *Proxy {
	p := &Proxy{
		policy: o.Policy, guard: o.Guard, log: o.Log, inbox: o.Inbox,
		idle: o.IdleTimeout, handshake: o.HandshakeTimeout,
		tunnels: map[net.Conn]struct{}{},
	}
	if p.idle == 0 {
		p.idle = 2 * time.Minute
	}
	if p.handshake == 0 {
		p.handshake = 10 * time.Second
	}
	p.transport = &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, portStr, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			port, _ := strconv.Atoi(portStr)
			c, err := p.guard.Dial(ctx, host, port)
			var ref *guard.Refused
			if errors.As(err, &ref) {
				if st, ok := ctx.Value(ctxKey{}).(*reqState); ok {
					st.refused = ref
				}
			}
			return c, err
		},
		Proxy:                 nil, // never chain to another proxy
		ForceAttemptHTTP2:     false,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   p.handshake,
		ResponseHeaderTimeout: p.idle,
	}
	p.ups = &upstreams{idle: map[string][]*upConn{}, perHost: 64, max: 256, timeout: 90 * time.Second}
	p.stopSweep = make(chan struct{})
	go func() {
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				p.ups.sweep()
			case <-p.stopSweep:
				return
			}
		}
	}()
	p.rp = &httputil.ReverseProxy{
		Rewrite:       func(*httputil.ProxyRequest) {}, // the outgoing URL is set before ServeHTTP
		Transport:     p.transport,
		FlushInterval: 0, // streams (text/event-stream, unknown length) are flushed by ReverseProxy itself
		BufferPool:    bufferPool{},
		ErrorHandler:  func(w http.ResponseWriter, r *http.Request, err error) { p.upstreamError(w, r, err) },
	}
	return p
}

// Explicit returns the handler of the explicit proxy port: absolute-form requests and CONNECT.
func (p *Proxy) Explicit() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodConnect:
			p.connect(w, r)
		case r.URL.IsAbs() && r.URL.Scheme == "http" && r.URL.Host != "":
			host, port := splitHostPort(r.URL.Host, 80)
			p.handle(w, r, ViaProxy, host, port)
		case r.URL.IsAbs():
			p.refuse(w, r, ViaProxy, r.URL.Hostname(), 0, http.StatusBadRequest,
				fmt.Sprintf("scheme %q is not proxied: use CONNECT for https", r.URL.Scheme))
		default:
			p.refuse(w, r, ViaProxy, r.Host, 0, http.StatusBadRequest,
				"this is an HTTP proxy: send absolute-form requests (http://host/path) or CONNECT host:port")
		}
	})
}

// Transparent returns the handler of the transparent HTTP port: the destination is the Host
// header, port 80 unless it names one.
func (p *Proxy) Transparent() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host == "" {
			p.refuse(w, r, ViaTransparent, "", 80, http.StatusBadRequest, "no Host header: the sidecar decides by the host a client asks for")
			return
		}
		host, port := splitHostPort(r.Host, 80)
		p.handle(w, r, ViaTransparent, host, port)
	})
}

func splitHostPort(hostport string, def int) (string, int) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		return strings.Trim(hostport, "[]"), def
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return host, def
	}
	return host, port
}

// handle decides and serves one plain HTTP request to host:port.
func (p *Proxy) handle(w http.ResponseWriter, r *http.Request, via, host string, port int) {
	start := time.Now()
	d := p.policy.Decide(host, port)
	entry := decisionlog.Entry{Via: via, Client: clientOf(r.RemoteAddr), Method: r.Method, Host: strings.ToLower(host), Port: port, Path: r.URL.Path, Rule: d.Rule, Mode: d.Mode, Reason: d.Reason}
	switch d.Mode {
	case policy.Block:
		p.deny(w, http.StatusForbidden, "blocked by the environment's egress policy", d.Rule)
		entry.Status = http.StatusForbidden
		p.record(entry, start)
		return
	case policy.Capture:
		p.capture(w, r, host, entry, start)
		return
	}
	// Allowed: forward through the guard. The upstream is told the host the client named: the
	// authority of an absolute-form request, else its Host header. The request is this
	// handler's own, so it is changed in place.
	cw := &countWriter{ResponseWriter: w}
	if via == ViaProxy {
		r.Host = r.URL.Host
	}
	r.URL.Scheme = "http"
	r.URL.Host = net.JoinHostPort(host, strconv.Itoa(port))
	if fast(r) {
		ref, cut := p.forward(cw, r, host, port)
		entry.Allowed = ref == nil
		if ref != nil {
			entry.Reason = "guard: " + ref.Reason
		}
		entry.Status = cw.status()
		entry.BytesIn = cw.n
		p.record(entry, start)
		if cut {
			// The answer was cut off: end the client's connection, so it cannot take a
			// partial body for a whole one.
			panic(http.ErrAbortHandler)
		}
		return
	}
	st := &reqState{}
	out := r.WithContext(context.WithValue(r.Context(), ctxKey{}, st))
	out.RequestURI = ""
	body := &countReader{r: r.Body}
	if r.Body != nil && r.Body != http.NoBody {
		out.Body = body
	}
	p.rp.ServeHTTP(cw, out)
	entry.Allowed = st.refused == nil
	if st.refused != nil {
		entry.Reason = "guard: " + st.refused.Reason
	}
	entry.Status = cw.status()
	entry.BytesOut = body.n.Load()
	entry.BytesIn = cw.n
	p.record(entry, start)
}

func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if st, ok := r.Context().Value(ctxKey{}).(*reqState); ok && st.refused != nil {
		p.deny(w, http.StatusForbidden, "refused by the sidecar's guard: "+st.refused.Reason, "guard")
		return
	}
	p.badGateway(w, err)
}

func (p *Proxy) deny(w http.ResponseWriter, status int, why, rule string) {
	w.Header().Set("X-Af-Egress", "block")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, "af sidecar: %s (%s)\n", why, rule)
}

func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, via, host string, port int, status int, reason string) {
	start := time.Now()
	p.deny(w, status, reason, "request")
	p.record(decisionlog.Entry{Via: via, Client: clientOf(r.RemoteAddr), Method: r.Method, Host: host, Port: port, Rule: "request", Mode: policy.Block, Reason: reason, Status: status}, start)
}

// capture answers a request locally and keeps it in the inbox.
func (p *Proxy) capture(w http.ResponseWriter, r *http.Request, host string, entry decisionlog.Entry, start time.Time) {
	limit := int64(1 << 20)
	if p.inbox != nil {
		limit = int64(p.inbox.MaxBody())
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, limit+1))
	// Drain (bounded) what the bound left, so the client's write completes.
	rest, _ := io.Copy(io.Discard, io.LimitReader(r.Body, 16<<20))
	m := inbox.Message{Kind: inbox.KindHTTP, Client: entry.Client, Method: r.Method, Host: strings.ToLower(host), Path: r.URL.RequestURI(), Header: inbox.Redact(r.Header), Body: string(body)}
	if p.inbox != nil {
		m = p.inbox.Add(m)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Af-Egress", "capture")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(map[string]any{"af": "captured", "id": m.ID, "host": m.Host})
	entry.Status = http.StatusOK
	entry.BytesOut = int64(len(body)) + rest
	entry.Reason += "; captured as " + m.ID
	p.record(entry, start)
}

// clientOf is the address (no port) of a peer given as host:port, "" when it is not one.
func clientOf(hostport string) string {
	ap, err := netip.ParseAddrPort(hostport)
	if err != nil {
		return ""
	}
	return ap.Addr().Unmap().String()
}

func (p *Proxy) record(e decisionlog.Entry, start time.Time) {
	if p.log == nil {
		return
	}
	e.DurationMS = float64(time.Since(start).Microseconds()) / 1000
	p.log.Record(e)
}

// bufferPool lends ReverseProxy its copy buffers instead of allocating 32 KiB per request.
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *buffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { buffers.Put(&b) }

type countReader struct {
	r io.ReadCloser
	n atomic.Int64
}

func (c *countReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

func (c *countReader) Close() error { return c.r.Close() }

type countWriter struct {
	http.ResponseWriter
	code int
	n    int64
}

func (c *countWriter) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *countWriter) Write(b []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	n, err := c.ResponseWriter.Write(b)
	c.n += int64(n)
	return n, err
}

func (c *countWriter) status() int {
	if c.code == 0 {
		return http.StatusOK
	}
	return c.code
}

// Flush lets streamed responses through.
func (c *countWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the underlying writer (for hijacking upgrades).
func (c *countWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
