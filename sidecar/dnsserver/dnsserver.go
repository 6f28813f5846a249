// Package dnsserver is the environment's only resolver. Names that belong to the environment
// (its services, short or qualified, and anything under its namespace) are forwarded to the
// cluster's resolver. Every other name is answered with the sidecar's own address, so a client
// that ignores proxy settings still connects to the sidecar, which then decides. External
// names are never forwarded anywhere, so a query cannot carry data out. Other namespaces'
// names do not resolve: names do not cross environments.
package dnsserver

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/antifailure/af/sidecar/decisionlog"
)

// TTL of the answers the sidecar makes itself: short, so a changed address takes effect soon.
const TTL = 5

// maxUDP is the largest UDP answer the server sends (the DNS flag day's 1232).
const maxUDP = 1232

// Config configures a Server.
type Config struct {
	Namespace       string
	ClusterDomain   string
	Services        []string
	ClusterResolver string
	AdvertiseV4     netip.Addr
	AdvertiseV6     netip.Addr
	IPv6            bool
	Log             *decisionlog.Log
	// ForwardTimeout bounds one exchange with the cluster resolver.
	ForwardTimeout time.Duration
}

// Server answers queries.
type Server struct {
	cfg    Config
	zone   string // <ns>.svc.<domain>.
	domain string // <domain>.
	// The same with a leading dot, and the namespace's own short forms: what classify compares
	// with, made once rather than for every query.
	dotZone, dotDomain, ns, nsSvc string
	services                      map[string]bool
	// cache is shared by every UDP socket's loop (one per CPU).
	cache *answerCache
	udp   *udpPool
	tcp   *dns.Client

	// shared is the relay every batched UDP loop uses: each sends its relayed queries from its
	// own socket, and whichever socket the resolver's answers arrive at answers the clients.
	// It lives while loops do (loops counts them).
	sharedMu sync.Mutex
	shared   *relay
	loops    int

	mu     sync.Mutex
	logged map[string]time.Time
}

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.ForwardTimeout == 0 {
		cfg.ForwardTimeout = 2 * time.Second
	}
	domain := dns.Fqdn(strings.ToLower(cfg.ClusterDomain))
	s := &Server{
		cfg:      cfg,
		domain:   domain,
		zone:     strings.ToLower(cfg.Namespace) + ".svc." + domain,
		ns:       strings.ToLower(cfg.Namespace),
		nsSvc:    strings.ToLower(cfg.Namespace) + ".svc",
		services: map[string]bool{},
		udp:      &udpPool{addr: cfg.ClusterResolver, timeout: cfg.ForwardTimeout},
		tcp:      &dns.Client{Net: "tcp", Timeout: cfg.ForwardTimeout},
		logged:   map[string]time.Time{},
	}
	for _, n := range cfg.Services {
		s.services[strings.ToLower(n)] = true
	}
	s.dotZone, s.dotDomain = "."+s.zone, "."+s.domain
	s.cache = newAnswerCache(4096)
	return s
}

// ServeDNS implements dns.Handler.
func (s *Server) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	proto := "udp"
	if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		proto = "tcp"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*s.cfg.ForwardTimeout+time.Second)
	defer cancel()
	var client netip.Addr
	if ap, err := netip.ParseAddrPort(w.RemoteAddr().String()); err == nil {
		client = ap.Addr()
	}
	resp := s.answer(ctx, r, proto, client)
	if resp != nil {
		_ = w.WriteMsg(resp)
	}
}

// kind of name.
type kind int

const (
	external kind = iota
	internal
	foreign
)

// classify says whose name q is and, for the environment's own names, the name to forward.
// It allocates nothing for a name already in lower case, but for the short forms of a service
// name (rewritten to the full one).
func (s *Server) classify(asked string) (kind, string) {
	q := strings.ToLower(asked)
	if q == s.zone || strings.HasSuffix(q, s.dotZone) {
		return internal, asked
	}
	trimmed := strings.TrimSuffix(q, ".")
	first, rest, dotted := strings.Cut(trimmed, ".")
	if s.services[first] && (rest == "" || rest == s.ns || rest == s.nsSvc) {
		return internal, first + "." + s.zone
	}
	if q == s.domain || strings.HasSuffix(q, s.dotDomain) || strings.HasSuffix(q, ".svc.") ||
		strings.HasSuffix(q, ".in-addr.arpa.") || strings.HasSuffix(q, ".ip6.arpa.") || !dotted {
		return foreign, ""
	}
	return external, ""
}

// Answer computes the response to r, received over proto ("udp" or "tcp"). It returns nil for
// a message that must not be answered (a response, not a query).
func (s *Server) Answer(ctx context.Context, r *dns.Msg, proto string) *dns.Msg {
	return s.answer(ctx, r, proto, netip.Addr{})
}

// answer is Answer for a query from client (the zero Addr when unknown), which the decision
// log records.
func (s *Server) answer(ctx context.Context, r *dns.Msg, proto string, client netip.Addr) *dns.Msg {
	if r == nil || r.Response {
		return nil
	}
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = false
	m.RecursionAvailable = true
	opt := r.IsEdns0()
	size := dns.MinMsgSize
	if opt != nil {
		size = max(dns.MinMsgSize, min(int(opt.UDPSize()), maxUDP))
	}
	finish := func(resp *dns.Msg) *dns.Msg {
		resp.Extra = stripOPT(resp.Extra)
		if opt != nil {
			resp.SetEdns0(maxUDP, opt.Do())
		}
		if proto == "udp" {
			resp.Truncate(size)
		}
		return resp
	}
	if opt != nil && opt.Version() != 0 {
		m.SetEdns0(maxUDP, false)
		m.Rcode = dns.RcodeBadVers // packed into the OPT record's extended rcode
		return m
	}
	if r.Opcode != dns.OpcodeQuery {
		m.Rcode = dns.RcodeNotImplemented
		return finish(m)
	}
	if len(r.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		return finish(m)
	}
	q := r.Question[0]
	if q.Qclass != dns.ClassINET {
		m.Rcode = dns.RcodeRefused
		s.record(q.Name, false, "refused: only class IN is answered", client)
		return finish(m)
	}
	switch q.Qtype {
	case dns.TypeAXFR, dns.TypeIXFR, dns.TypeANY:
		m.Rcode = dns.RcodeRefused
		s.record(q.Name, false, fmt.Sprintf("refused: %s queries are not answered", dns.TypeToString[q.Qtype]), client)
		return finish(m)
	}
	k, fwd := s.classify(q.Name)
	switch k {
	case internal:
		resp, err := s.forward(ctx, r, fwd, proto)
		if err != nil {
			m.Rcode = dns.RcodeServerFailure
			return finish(m)
		}
		return finish(resp)
	case foreign:
		m.Rcode = dns.RcodeNameError
		s.record(q.Name, false, "not a name of this environment: names of the cluster and of other environments do not resolve here", client)
		return finish(m)
	}
	hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: TTL}
	switch q.Qtype {
	case dns.TypeA:
		hdr.Rrtype = dns.TypeA
		m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: s.cfg.AdvertiseV4.AsSlice()})
	case dns.TypeAAAA:
		if s.cfg.IPv6 && s.cfg.AdvertiseV6.IsValid() {
			hdr.Rrtype = dns.TypeAAAA
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: s.cfg.AdvertiseV6.AsSlice()})
		}
	}
	if len(m.Answer) == 0 {
		// NOERROR with no answer: the name exists (it is the sidecar), not with this type. The
		// SOA tells caches how long to remember that.
		m.Ns = append(m.Ns, s.soa(q.Name))
	}
	s.recordExternal(q.Name, client)
	return finish(m)
}

func (s *Server) soa(name string) dns.RR {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: name, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: TTL},
		Ns:      "af-sidecar.invalid.",
		Mbox:    "hostmaster.af-sidecar.invalid.",
		Serial:  1,
		Refresh: 60, Retry: 60, Expire: 60, Minttl: TTL,
	}
}

// forward sends the query for name to the cluster resolver, over TCP when the answer was
// truncated or the client used TCP, and rewrites the answer back to the name asked.
func (s *Server) forward(ctx context.Context, r *dns.Msg, name, proto string) (*dns.Msg, error) {
	asked := r.Question[0].Name
	q := r.Copy()
	q.Question[0].Name = name
	q.Extra = stripOPT(q.Extra)
	q.SetEdns0(4096, false)
	q.Id = dns.Id() // the resolver sees our id, not the client's
	var resp *dns.Msg
	var err error
	if proto == "tcp" {
		resp, _, err = s.tcp.ExchangeContext(ctx, q, s.cfg.ClusterResolver)
	} else {
		resp, err = s.udp.exchange(ctx, q)
		if err == nil && resp.Truncated {
			resp, _, err = s.tcp.ExchangeContext(ctx, q, s.cfg.ClusterResolver)
		}
	}
	if err != nil {
		return nil, err
	}
	resp.Id = r.Id
	resp.Question = r.Question
	for _, rrs := range [][]dns.RR{resp.Answer, resp.Ns, resp.Extra} {
		for _, rr := range rrs {
			if strings.EqualFold(rr.Header().Name, name) {
				rr.Header().Name = asked
			}
		}
	}
	return resp, nil
}

func stripOPT(rrs []dns.RR) []dns.RR {
	out := rrs[:0:0]
	for _, rr := range rrs {
		if _, ok := rr.(*dns.OPT); !ok {
			out = append(out, rr)
		}
	}
	return out
}

func (s *Server) record(name string, allowed bool, reason string, client netip.Addr) {
	if s.cfg.Log == nil {
		return
	}
	mode := "answer"
	if !allowed {
		mode = "block"
	}
	e := decisionlog.Entry{Via: "dns", Host: strings.TrimSuffix(strings.ToLower(name), "."), Rule: "dns", Mode: mode, Allowed: allowed, Reason: reason}
	if client.IsValid() {
		e.Client = client.Unmap().String()
	}
	s.cfg.Log.Record(e)
}

// recordExternal logs an external name answered with the sidecar's address, once a minute per
// name, so lookups do not crowd out the connections that matter.
func (s *Server) recordExternal(name string, client netip.Addr) {
	if s.cfg.Log == nil {
		return
	}
	name = strings.ToLower(name)
	now := time.Now()
	s.mu.Lock()
	last, seen := s.logged[name]
	if seen && now.Sub(last) < time.Minute {
		s.mu.Unlock()
		return
	}
	if len(s.logged) > 10000 {
		s.logged = map[string]time.Time{}
	}
	s.logged[name] = now
	s.mu.Unlock()
	s.record(name, true, "answered with the sidecar's address; the connection is decided when it is made", client)
}
