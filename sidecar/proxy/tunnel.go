package proxy

// Tunnels: CONNECT and the transparent TLS listener, each decided before anything is dialled,
// dialled only through the guard, then spliced byte for byte (tracked, so Close ends them).

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/antifailure/af/sidecar/decisionlog"
	"github.com/antifailure/af/sidecar/guard"
	"github.com/antifailure/af/sidecar/policy"
	"github.com/antifailure/af/sidecar/tlshello"
)

// connect serves CONNECT host:port.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	host, portStr, err := net.SplitHostPort(r.Host)
	port, perr := strconv.Atoi(portStr)
	if err != nil || perr != nil || port < 1 || port > 65535 {
		p.refuse(w, r, ViaProxy, r.Host, 0, http.StatusBadRequest, "CONNECT needs host:port")
		return
	}
	host = strings.Trim(host, "[]")
	d := p.policy.Decide(host, port)
	entry := decisionlog.Entry{Via: ViaProxy, Client: clientOf(r.RemoteAddr), Method: http.MethodConnect, Host: strings.ToLower(host), Port: port, Rule: d.Rule, Mode: d.Mode, Reason: d.Reason}
	switch d.Mode {
	case policy.Block:
		p.deny(w, http.StatusForbidden, "blocked by the environment's egress policy", d.Rule)
		entry.Status = http.StatusForbidden
		p.record(entry, start)
		return
	case policy.Capture:
		p.deny(w, http.StatusForbidden, "capture mode: a tunnel cannot be captured, because the sidecar does not terminate TLS; use plain HTTP to a captured host", d.Rule)
		entry.Status = http.StatusForbidden
		entry.Reason = d.Reason + "; a tunnel cannot be captured"
		p.record(entry, start)
		return
	}
	up, ref, err := p.dialOut(r.Context(), host, port)
	if err != nil {
		if ref != nil {
			p.deny(w, http.StatusForbidden, "refused by the sidecar's guard: "+ref.Reason, "guard")
			entry.Status, entry.Reason = http.StatusForbidden, "guard: "+ref.Reason
		} else {
			w.Header().Set("X-Af-Egress", "error")
			http.Error(w, "af sidecar: cannot connect: "+err.Error(), http.StatusBadGateway)
			entry.Status, entry.Allowed, entry.Reason = http.StatusBadGateway, true, d.Reason+"; connect failed: "+err.Error()
		}
		p.record(entry, start)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "af sidecar: CONNECT needs HTTP/1.1", http.StatusHTTPVersionNotSupported)
		return
	}
	client, brw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if _, err := client.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n")); err != nil {
		up.Close()
		client.Close()
		return
	}
	// Bytes the client sent after the CONNECT line (a pipelined ClientHello) go first.
	var pre []byte
	if n := brw.Reader.Buffered(); n > 0 {
		pre, _ = brw.Reader.Peek(n)
		pre = append([]byte(nil), pre...)
	}
	entry.Allowed, entry.Status = true, http.StatusOK
	out, in := p.splice(client, up, pre)
	entry.BytesOut, entry.BytesIn = out, in
	p.record(entry, start)
}

// ServeTLS handles one connection to the transparent TLS port: it reads the ClientHello,
// decides by its server name, and splices the connection to the destination unchanged.
func (p *Proxy) ServeTLS(c net.Conn, port int) {
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(p.handshake))
	raw, sni, err := tlshello.Read(c)
	_ = c.SetReadDeadline(time.Time{})
	entry := decisionlog.Entry{Via: ViaTransparent, Client: clientOf(c.RemoteAddr().String()), Method: "TLS", Host: sni, Port: port}
	if err != nil {
		entry.Mode, entry.Rule, entry.Reason = policy.Block, "request", "TLS without a usable server name: "+err.Error()
		if errors.Is(err, tlshello.ErrNoSNI) {
			writeAlert(c, 112) // unrecognized_name
		}
		c.Close()
		p.record(entry, start)
		return
	}
	d := p.policy.Decide(sni, port)
	entry.Rule, entry.Mode, entry.Reason = d.Rule, d.Mode, d.Reason
	if d.Mode != policy.Allow {
		if d.Mode == policy.Capture {
			entry.Reason += "; TLS cannot be captured, because the sidecar does not terminate it"
		}
		writeAlert(c, 49) // access_denied
		c.Close()
		p.record(entry, start)
		return
	}
	up, ref, err := p.dialOut(context.Background(), sni, port)
	if err != nil {
		if ref != nil {
			entry.Reason = "guard: " + ref.Reason
		} else {
			entry.Allowed = true
			entry.Reason = d.Reason + "; connect failed: " + err.Error()
		}
		writeAlert(c, 49)
		c.Close()
		p.record(entry, start)
		return
	}
	entry.Allowed = true
	out, in := p.splice(c, up, raw)
	entry.BytesOut, entry.BytesIn = out, in
	p.record(entry, start)
}

// dialOut connects to host:port through the guard within the handshake timeout. ref is set
// when the guard refused the destination.
func (p *Proxy) dialOut(parent context.Context, host string, port int) (c net.Conn, ref *guard.Refused, err error) {
	ctx, cancel := context.WithTimeout(parent, p.handshake)
	defer cancel()
	c, err = p.guard.Dial(ctx, host, port)
	if errors.As(err, &ref) {
		return nil, ref, err
	}
	return c, nil, err
}

// writeAlert sends a fatal TLS alert so the client fails at once with a reason.
func writeAlert(c net.Conn, desc byte) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, desc})
}

// splice copies both ways until either side ends or is idle too long. pre is sent upstream
// first. It returns the bytes sent out and received.
func (p *Proxy) splice(client, up net.Conn, pre []byte) (out, in int64) {
	if !p.track(client, up) {
		client.Close()
		up.Close()
		return 0, 0
	}
	defer p.untrack(client, up)
	if len(pre) > 0 {
		n, err := up.Write(pre)
		out += int64(n)
		if err != nil {
			client.Close()
			up.Close()
			return out, 0
		}
	}
	var wg sync.WaitGroup
	var outN, inN atomic.Int64
	cp := func(dst, src net.Conn, n *atomic.Int64) {
		defer wg.Done()
		p.copyUntilIdle(dst, src, n)
		// Half-close so the other direction can finish, then let it end.
		if tc, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		} else {
			dst.Close()
		}
	}
	wg.Add(2)
	go cp(up, client, &outN)
	go cp(client, up, &inN)
	wg.Wait()
	client.Close()
	up.Close()
	return out + outN.Load(), inN.Load()
}

// spliceChunk is how much one turn of copyUntilIdle moves at most. Between two TCP
// connections the kernel moves it (splice(2) through a pipe), never through this process's
// memory; each turn renews the idle deadline.
const spliceChunk = 4 << 20

// copyUntilIdle copies src to dst until src ends, either side fails, or src sends nothing for
// the idle timeout. A deadline cannot see the bytes a turn has moved so far, so a turn that
// times out after moving some starts another: an idle tunnel ends between one and two idle
// timeouts after its last byte.
func (p *Proxy) copyUntilIdle(dst, src net.Conn, n *atomic.Int64) {
	dst, src = bare(dst), bare(src)
	for {
		_ = src.SetReadDeadline(time.Now().Add(p.idle))
		k, err := io.CopyN(dst, src, spliceChunk)
		n.Add(k)
		if err == nil {
			continue
		}
		var ne net.Error
		if k > 0 && errors.As(err, &ne) && ne.Timeout() {
			continue
		}
		return
	}
}

// bare is the connection c wraps, when it says (a counted listener's), else c.
func bare(c net.Conn) net.Conn {
	if w, ok := c.(interface{ NetConn() net.Conn }); ok {
		return w.NetConn()
	}
	return c
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return false
	}
	for _, c := range cs {
		p.tunnels[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.tunnels, c)
	}
}

// Close ends every tunnel and idle upstream connection; new tunnels are refused.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closing = true
	for c := range p.tunnels {
		c.Close()
	}
	p.mu.Unlock()
	p.transport.CloseIdleConnections()
	p.ups.close()
	p.sweepOnce.Do(func() { close(p.stopSweep) })
}

// Tunnels returns how many connections are being spliced.
func (p *Proxy) Tunnels() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.tunnels) / 2
}
