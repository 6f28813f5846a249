// Package sidecar runs an environment's egress sidecar: its DNS server, explicit and
// transparent proxies, SMTP capture and control endpoint, sharing one policy, one guard, one
// decision log and one inbox. It knows nothing of Kubernetes; `af sidecar --config FILE` runs
// it in the environment's sidecar pod.
package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/antifailure/af/sidecar/config"
	"github.com/antifailure/af/sidecar/control"
	"github.com/antifailure/af/sidecar/decisionlog"
	"github.com/antifailure/af/sidecar/dnsserver"
	"github.com/antifailure/af/sidecar/guard"
	"github.com/antifailure/af/sidecar/inbox"
	"github.com/antifailure/af/sidecar/proxy"
)

// Listener names, for Addr.
const (
	Proxy   = "proxy"
	HTTP    = "http"
	HTTPS   = "https"
	DNS     = "dns"
	SMTP    = "smtp"
	Control = "control"
)

// Sidecar is a running sidecar.
type Sidecar struct {
	cfg   *config.Resolved
	Log   *decisionlog.Log
	Inbox *inbox.Store
	proxy *proxy.Proxy

	addrs     map[string]net.Addr
	listeners []net.Listener
	https     []*http.Server
	dnsSrv    []*dns.Server
	udp       []net.PacketConn
	conns     sync.WaitGroup
	rejected  atomic.Int64
	sem       chan struct{}
	ready     atomic.Bool
	cancel    context.CancelFunc
	errlog    *log.Logger
	shutdown  sync.Once
	shutErr   error

	connMu  sync.Mutex
	live    map[net.Conn]struct{}
	closing bool
}

// Start opens every listener (failing, with the address, if one cannot be opened) and serves.
// Decisions go as JSON lines to out; server errors to errOut.
func Start(ctx context.Context, cfg *config.Resolved, out, errOut io.Writer) (*Sidecar, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &Sidecar{
		cfg:    cfg,
		Log:    decisionlog.New(cfg.Environment, cfg.Limits.LogEntries, out),
		Inbox:  inbox.NewStore(cfg.Limits.InboxMessages, cfg.Limits.InboxBodyBytes),
		addrs:  map[string]net.Addr{},
		live:   map[net.Conn]struct{}{},
		cancel: cancel,
		errlog: log.New(errOut, "af sidecar: ", log.LstdFlags),
	}
	var resolver guard.Resolver = net.DefaultResolver
	if cfg.UpstreamResolver != "" {
		upstream := cfg.UpstreamResolver
		resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, upstream)
		}}
	}
	g := guard.New(guard.Options{
		Resolver: resolver, ClusterCIDRs: cfg.ClusterPrefixes, Allowed: cfg.Policy.AllowedRanges(),
		Self: selfAddrs(cfg), IPv6: cfg.IPv6, DialTimeout: cfg.HandshakeTimeout,
	})
	s.proxy = proxy.New(proxy.Options{Policy: cfg.Policy, Guard: g, Log: s.Log, Inbox: s.Inbox, IdleTimeout: cfg.IdleTimeout, HandshakeTimeout: cfg.HandshakeTimeout})
	s.sem = make(chan struct{}, cfg.Limits.MaxConns)
	if err := s.open(ctx, s.sem); err != nil {
		cancel()
		s.closeListeners()
		s.Log.Close()
		return nil, err
	}
	if _, ok := s.addrs[DNS]; ok && cfg.ClusterResolver != "" {
		go s.warmDNS(ctx, warmDNSFor)
	} else {
		s.ready.Store(true)
	}
	return s, nil
}

// warmDNSFor bounds warmDNS: after it the sidecar says it is ready whatever the resolver did.
const warmDNSFor = 15 * time.Second

// warmDNS asks the DNS listener one name of the environment's own zone before the sidecar says
// it is ready (/healthz), so that the relay's one path to the cluster resolver (from port 53 to
// the resolver's 53: one flow, kept alive by every relayed query) exists before any pod asks.
// Under an enforcer that decides each new connection in userspace (kube-network-policies, and
// kindnet with its library) only a flow's first packet waits for a verdict; under load that
// wait outlasted the forward timeout, and the first lookup of a service's name answered
// SERVFAIL while every later one, on the established flow, was answered. Any answer but
// SERVFAIL (NXDOMAIN is one) proves the path; after warmDNSFor it gives up and says so.
func (s *Sidecar) warmDNS(ctx context.Context, bound time.Duration) {
	defer s.ready.Store(true)
	ua, ok := s.addrs[DNS].(*net.UDPAddr)
	if !ok {
		return
	}
	to := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(ua.Port))
	if ip, ok := netip.AddrFromSlice(ua.IP); ok && !ip.Unmap().IsUnspecified() {
		to = netip.AddrPortFrom(ip.Unmap(), uint16(ua.Port)) // a listener on one address
	}
	name := "af-warm." + s.cfg.Namespace + ".svc." + strings.TrimSuffix(s.cfg.ClusterDomain, ".") + "."
	start := time.Now()
	c := &dns.Client{Net: "udp", Timeout: 3 * time.Second}
	for try := 1; ctx.Err() == nil; try++ {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		r, _, err := c.ExchangeContext(ctx, m, to.String())
		if err == nil && r.Rcode != dns.RcodeServerFailure {
			if try > 1 || time.Since(start) > time.Second {
				s.errlog.Printf("the cluster resolver answered through the DNS relay after %s (%d tries)", time.Since(start).Round(time.Millisecond), try)
			}
			return
		}
		if time.Since(start) >= bound {
			s.errlog.Printf("the cluster resolver did not answer through the DNS relay within %s (%d tries, last: %v): ready anyway; the first lookups of the environment's names may fail", bound, try, warmFailure(r, err))
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func warmFailure(r *dns.Msg, err error) string {
	if err != nil {
		return err.Error()
	}
	return dns.RcodeToString[r.Rcode]
}

func selfAddrs(cfg *config.Resolved) []netip.Addr {
	out := []netip.Addr{cfg.AdvertiseV4}
	if cfg.AdvertiseV6.IsValid() {
		out = append(out, cfg.AdvertiseV6)
	}
	return out
}

func (s *Sidecar) listen(name, addr string, sem chan struct{}) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen.%s %s: %w", name, addr, err)
	}
	s.addrs[name] = ln.Addr()
	lim := &limitListener{Listener: ln, sem: sem, rejected: &s.rejected}
	s.listeners = append(s.listeners, lim)
	return lim, nil
}

func (s *Sidecar) open(ctx context.Context, sem chan struct{}) error {
	l := s.cfg.Listen
	httpServer := func(name, addr string, h http.Handler) error {
		if addr == "" {
			return nil
		}
		ln, err := s.listen(name, addr, sem)
		if err != nil {
			return err
		}
		srv := &http.Server{
			Handler:           h,
			ReadHeaderTimeout: s.cfg.HandshakeTimeout,
			IdleTimeout:       s.cfg.IdleTimeout,
			MaxHeaderBytes:    s.cfg.Limits.MaxHeaderBytes,
			ErrorLog:          s.errlog,
			BaseContext:       func(net.Listener) context.Context { return ctx },
		}
		s.https = append(s.https, srv)
		go func() { _ = srv.Serve(ln) }()
		return nil
	}
	if err := httpServer(Proxy, l.Proxy, s.proxy.Explicit()); err != nil {
		return err
	}
	if err := httpServer(HTTP, l.HTTP, s.proxy.Transparent()); err != nil {
		return err
	}
	if l.HTTPS != "" {
		ln, err := s.listen(HTTPS, l.HTTPS, sem)
		if err != nil {
			return err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if _, p, err := net.SplitHostPort(l.HTTPS); err == nil && p != "0" {
			port, _ = strconv.Atoi(p)
		}
		s.serveConns(ln, func(c net.Conn) { s.proxy.ServeTLS(c, port) })
	}
	for i, addr := range l.SMTP {
		name := SMTP
		if i > 0 {
			name = fmt.Sprintf("%s%d", SMTP, i)
		}
		ln, err := s.listen(name, addr, sem)
		if err != nil {
			return err
		}
		srv := &inbox.SMTPServer{Store: s.Inbox, Hostname: "af-sidecar." + s.cfg.Environment, IdleTimeout: s.cfg.IdleTimeout, OnMessage: s.logMail}
		s.serveConns(ln, func(c net.Conn) { srv.ServeConn(ctx, c) })
	}
	if l.DNS != "" {
		if err := s.openDNS(l.DNS, sem); err != nil {
			return err
		}
	}
	// The control endpoint is not limited by the services' connection limit.
	ln, err := net.Listen("tcp", l.Control)
	if err != nil {
		return fmt.Errorf("listen.control %s: %w", l.Control, err)
	}
	s.addrs[Control] = ln.Addr()
	s.listeners = append(s.listeners, ln)
	ctl := &http.Server{Handler: control.Handler(s.Log, s.Inbox, s.ready.Load), ReadHeaderTimeout: 10 * time.Second, ErrorLog: s.errlog}
	s.https = append(s.https, ctl)
	go func() { _ = ctl.Serve(ln) }()
	return nil
}

func (s *Sidecar) openDNS(addr string, sem chan struct{}) error {
	h := dnsserver.New(dnsserver.Config{
		Namespace: s.cfg.Namespace, ClusterDomain: s.cfg.ClusterDomain, Services: s.cfg.Services,
		ClusterResolver: s.cfg.ClusterResolver, AdvertiseV4: s.cfg.AdvertiseV4, AdvertiseV6: s.cfg.AdvertiseV6,
		IPv6: s.cfg.IPv6, Log: s.Log,
	})
	// One UDP socket per CPU on the same port (SO_REUSEPORT): the kernel spreads queries over
	// them, so reading is not one goroutine's job.
	reuse := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, unix.SO_REUSEPORT, 1) })
		if err != nil {
			return err
		}
		return serr
	}}
	// UDP and TCP share the port. With port 0 (tests) the UDP port's TCP twin may be taken:
	// pick another.
	var pc net.PacketConn
	var ln net.Listener
	for attempt := 0; ; attempt++ {
		var err error
		if pc, err = reuse.ListenPacket(context.Background(), "udp", addr); err != nil {
			return fmt.Errorf("listen.dns %s (udp): %w", addr, err)
		}
		if ln, err = s.listen(DNS+"-tcp", pc.LocalAddr().String(), sem); err == nil {
			break
		}
		pc.Close()
		if _, port, _ := net.SplitHostPort(addr); port != "0" || attempt == 20 {
			return err
		}
	}
	s.addrs[DNS] = pc.LocalAddr()
	extra := []net.PacketConn{}
	for i := 1; i < runtime.GOMAXPROCS(0); i++ {
		more, err := reuse.ListenPacket(context.Background(), "udp", pc.LocalAddr().String())
		if err != nil {
			break // one socket still serves
		}
		extra = append(extra, more)
	}
	tcp := &dns.Server{Listener: ln, Handler: h, ReadTimeout: s.cfg.HandshakeTimeout, IdleTimeout: func() time.Duration { return s.cfg.IdleTimeout }}
	s.dnsSrv = append(s.dnsSrv, tcp)
	started := make(chan struct{})
	tcp.NotifyStartedFunc = func() { close(started) }
	go func() { _ = tcp.ActivateAndServe() }()
	<-started
	for _, c := range append([]net.PacketConn{pc}, extra...) {
		s.udp = append(s.udp, c)
		s.conns.Add(1)
		go func() {
			defer s.conns.Done()
			_ = h.ServeUDP(c.(*net.UDPConn))
		}()
	}
	return nil
}

func (s *Sidecar) serveConns(ln net.Listener, serve func(net.Conn)) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.connMu.Lock()
			if s.closing {
				s.connMu.Unlock()
				c.Close()
				continue
			}
			s.live[c] = struct{}{}
			s.conns.Add(1)
			s.connMu.Unlock()
			go func() {
				defer s.conns.Done()
				defer func() {
					s.connMu.Lock()
					delete(s.live, c)
					s.connMu.Unlock()
				}()
				serve(c)
			}()
		}
	}()
}

func (s *Sidecar) logMail(m inbox.Message) {
	host := ""
	if len(m.To) > 0 {
		if _, domain, ok := cutLast(m.To[0], "@"); ok {
			host = domain
		}
	}
	s.Log.Record(decisionlog.Entry{Via: SMTP, Client: m.Client, Method: "MAIL", Host: host, Rule: "smtp", Mode: "capture", Reason: fmt.Sprintf("mail from %s to %d recipient(s) captured as %s", m.From, len(m.To), m.ID), BytesOut: int64(len(m.Body))})
}

func cutLast(s, sep string) (string, string, bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}

// Addr returns the address a listener is bound to (useful with port 0), or nil.
func (s *Sidecar) Addr(name string) net.Addr { return s.addrs[name] }

// Active returns how many client connections the sidecar holds.
func (s *Sidecar) Active() int { return len(s.sem) }

// Rejected returns how many connections were closed at once because the limit was reached.
func (s *Sidecar) Rejected() int64 { return s.rejected.Load() }

// Shutdown stops accepting, lets requests in flight finish until ctx ends, then closes
// everything that is left, tunnels included.
func (s *Sidecar) Shutdown(ctx context.Context) error {
	s.shutdown.Do(func() { s.shutErr = s.doShutdown(ctx) })
	return s.shutErr
}

func (s *Sidecar) doShutdown(ctx context.Context) error {
	s.ready.Store(false)
	s.closeListeners()
	var errs []error
	// Requests in flight get half the time left; then whatever is still open is closed (a
	// connection that never sent a request counts as busy to http.Server for 5 s).
	graceful := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		graceful = time.Until(dl) / 2
	}
	gctx, gcancel := context.WithTimeout(ctx, graceful)
	var wg sync.WaitGroup
	for _, srv := range s.https {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Shutdown(gctx); err != nil {
				_ = srv.Close()
			}
		}()
	}
	wg.Wait()
	gcancel()
	for _, d := range s.dnsSrv {
		_ = d.ShutdownContext(ctx)
	}
	s.proxy.Close()
	s.cancel() // ends SMTP sessions
	s.connMu.Lock()
	s.closing = true
	for c := range s.live {
		c.Close() // TLS connections still waiting for their ClientHello, SMTP sessions
	}
	s.connMu.Unlock()
	done := make(chan struct{})
	go func() { s.conns.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("connections still open after the shutdown deadline"))
	}
	s.Log.Close()
	return errors.Join(errs...)
}

func (s *Sidecar) closeListeners() {
	for _, ln := range s.listeners {
		_ = ln.Close()
	}
	for _, c := range s.udp {
		_ = c.Close()
	}
}

// Run starts the sidecar and serves until ctx ends, then shuts down within grace.
func Run(ctx context.Context, cfg *config.Resolved, out, errOut io.Writer, grace time.Duration) error {
	s, err := Start(ctx, cfg, out, errOut)
	if err != nil {
		return err
	}
	fmt.Fprintf(errOut, "af sidecar: serving environment %s: proxy %v, http %v, https %v, dns %v, control %v\n",
		cfg.Environment, s.Addr(Proxy), s.Addr(HTTP), s.Addr(HTTPS), s.Addr(DNS), s.Addr(Control))
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	return s.Shutdown(sctx)
}

// limitListener closes connections at once when the sidecar already holds the maximum, so a
// flood fails fast instead of queueing behind live connections.
type limitListener struct {
	net.Listener
	sem      chan struct{}
	rejected *atomic.Int64
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.sem <- struct{}{}:
			return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
		default:
			l.rejected.Add(1)
			c.Close()
		}
	}
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// NetConn is the connection this one counts, so the proxy can splice between two TCP
// connections in the kernel; closing stays with the limitConn.
func (c *limitConn) NetConn() net.Conn { return c.Conn }

// CloseWrite half-closes when the underlying connection can.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}
