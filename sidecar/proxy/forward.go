package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/antifailure/af/sidecar/guard"
)

// The fast path forwards a GET or HEAD without a body in the handler's own goroutine: it
// writes the request to a kept upstream connection and reads the answer from it, where
// http.Transport hands each request to a writing and a reading goroutine of the connection.
// Everything else (a body, an upgrade, Expect, a method that is not safe to send twice) goes
// through httputil.ReverseProxy. Both decide, dial through the guard and record the same way.

// upConn is one kept connection to an upstream.
type upConn struct {
	c     net.Conn
	br    *bufio.Reader
	bw    *bufio.Writer
	since time.Time // when it went idle
}

// upstreams keeps idle connections by the destination a request named (host:port as
// decided), never by address, so a kept connection is reused only for the destination the
// policy and the guard allowed it for.
type upstreams struct {
	mu      sync.Mutex
	idle    map[string][]*upConn
	total   int
	perHost int
	max     int
	timeout time.Duration
	closed  bool
}

func (u *upstreams) get(key string) *upConn {
	u.mu.Lock()
	defer u.mu.Unlock()
	for {
		list := u.idle[key]
		if len(list) == 0 {
			return nil
		}
		c := list[len(list)-1]
		u.idle[key] = list[:len(list)-1]
		u.total--
		if time.Since(c.since) < u.timeout {
			return c
		}
		c.c.Close()
	}
}

// put keeps c for the next request to key, or closes it when the pool is full or closed.
func (u *upstreams) put(key string, c *upConn) {
	c.since = time.Now()
	u.mu.Lock()
	if u.closed || u.total >= u.max || len(u.idle[key]) >= u.perHost {
		u.mu.Unlock()
		c.c.Close()
		return
	}
	u.idle[key] = append(u.idle[key], c)
	u.total++
	u.mu.Unlock()
}

// sweep closes connections idle longer than the timeout.
func (u *upstreams) sweep() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for key, list := range u.idle {
		kept := list[:0]
		for _, c := range list {
			if time.Since(c.since) < u.timeout {
				kept = append(kept, c)
				continue
			}
			c.c.Close()
			u.total--
		}
		if len(kept) == 0 {
			delete(u.idle, key)
		} else {
			u.idle[key] = kept
		}
	}
}

// close closes every idle connection; later ones are closed when returned.
func (u *upstreams) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
	for _, list := range u.idle {
		for _, c := range list {
			c.c.Close()
		}
	}
	u.idle = map[string][]*upConn{}
	u.total = 0
}

// fast reports whether r can take the fast path.
func fast(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		(r.Body == nil || r.Body == http.NoBody) && r.ContentLength == 0 && len(r.TransferEncoding) == 0 &&
		r.Header.Get("Upgrade") == "" && r.Header.Get("Expect") == "" && r.Header.Get("Te") == "" &&
		r.ProtoMajor == 1
}

// hopHeaders are meaningful for one connection only (RFC 9110, section 7.6.1), so a proxy
// does not pass them on.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func removeHop(h http.Header) {
	for _, v := range h["Connection"] {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		delete(h, k)
	}
}

// forward sends r (a fast request, its URL and Host already set for the upstream) to
// host:port and writes the answer to w. It returns the guard's refusal, if any, and whether
// the answer was cut off (the caller then ends the client's connection, once it has
// recorded the decision).
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, host string, port int) (ref *guard.Refused, cut bool) {
	removeHop(r.Header)
	key := r.URL.Host
	for attempt := 0; ; attempt++ {
		uc := p.ups.get(key)
		reused := uc != nil
		if uc == nil {
			c, ref, err := p.dialOut(r.Context(), host, port)
			if ref != nil {
				p.deny(w, http.StatusForbidden, "refused by the sidecar's guard: "+ref.Reason, "guard")
				return ref, false
			}
			if err != nil {
				p.badGateway(w, err)
				return nil, false
			}
			uc = &upConn{c: c, br: bufio.NewReaderSize(c, 16<<10), bw: bufio.NewWriterSize(c, 4<<10)}
		}
		// A client that goes away ends the wait for the upstream and the copy of its answer.
		stop := context.AfterFunc(r.Context(), func() { _ = uc.c.SetDeadline(time.Unix(1, 0)) })
		resp, err := p.exchange(r, uc)
		if err != nil {
			stop()
			uc.c.Close()
			// A kept connection the upstream closed meanwhile fails before any answer: a
			// safe request is sent again once on a new one, as http.Transport does.
			if reused && attempt == 0 && r.Context().Err() == nil {
				continue
			}
			p.badGateway(w, err)
			return nil, false
		}
		return nil, p.answer(w, r, resp, uc, key, stop)
	}
}

// exchange writes r on uc and reads the answer's head, skipping interim (1xx) answers.
func (p *Proxy) exchange(r *http.Request, uc *upConn) (*http.Response, error) {
	_ = uc.c.SetDeadline(time.Now().Add(p.idle))
	writeHead(uc.bw, r)
	if err := uc.bw.Flush(); err != nil {
		return nil, err
	}
	for {
		resp, err := http.ReadResponse(uc.br, r)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			if resp.StatusCode == http.StatusSwitchingProtocols {
				return nil, errors.New("the upstream switched protocols, which the request did not ask for")
			}
			continue
		}
		_ = uc.c.SetDeadline(time.Time{})
		return resp, nil
	}
}

// writeHead writes the head of a fast request (it has no body): the request line in origin
// form, Host, then the headers as they came, less those for one connection. The server that
// parsed them refused any name or value a line break could hide in; Header.Write's sorting and
// Request.Write's own User-Agent are what this skips.
func writeHead(bw *bufio.Writer, r *http.Request) {
	bw.WriteString(r.Method)
	bw.WriteByte(' ')
	bw.WriteString(r.URL.RequestURI())
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(r.Host)
	bw.WriteString("\r\n")
	for k, vs := range r.Header {
		if k == "Host" {
			continue
		}
		for _, v := range vs {
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(strings.TrimSpace(v))
			bw.WriteString("\r\n")
		}
	}
	if r.Close {
		bw.WriteString("Connection: close\r\n")
	}
	bw.WriteString("\r\n")
}

// answer writes resp to w, then keeps uc when its answer was read to the end. stop ends the
// watch on the client. It reports whether the answer was cut off.
func (p *Proxy) answer(w http.ResponseWriter, r *http.Request, resp *http.Response, uc *upConn, key string, stop func() bool) bool {
	removeHop(resp.Header)
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	if len(resp.Trailer) > 0 {
		names := make([]string, 0, len(resp.Trailer))
		for k := range resp.Trailer {
			names = append(names, k)
		}
		h["Trailer"] = []string{strings.Join(names, ", ")}
	}
	w.WriteHeader(resp.StatusCode)
	streaming := resp.ContentLength == -1 || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	err := copyBody(w, resp.Body, streaming)
	clientGone := !stop()
	resp.Body.Close()
	for k, v := range resp.Trailer {
		h[http.TrailerPrefix+k] = v
	}
	if err != nil || clientGone || resp.Close || r.Close {
		uc.c.Close()
		return err != nil
	}
	p.ups.put(key, uc)
	return false
}

// copyBody copies src to w, flushing after each write when the answer streams.
func copyBody(w http.ResponseWriter, src io.Reader, streaming bool) error {
	bp := buffers.Get().(*[]byte)
	defer buffers.Put(bp)
	buf := *bp
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if streaming {
				if f, ok := w.(http.Flusher); ok {
					f.Flush()
				}
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

func (p *Proxy) badGateway(w http.ResponseWriter, err error) {
	w.Header().Set("X-Af-Egress", "error")
	http.Error(w, "af sidecar: upstream failed: "+err.Error(), http.StatusBadGateway)
}
