package dnsserver

import (
	"context"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/antifailure/af/internal/testreq"
	"github.com/antifailure/af/sidecar/decisionlog"
)

const ns = "af-env-shop-pr-1"

// fakeCluster is a stand-in for the cluster's resolver: a real DNS server on loopback that
// answers the environment's names and counts every query it receives.
type fakeCluster struct {
	addr string
	mu   sync.Mutex
	seen []string
}

func (f *fakeCluster) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	q := r.Question[0]
	f.mu.Lock()
	f.seen = append(f.seen, q.Name)
	f.mu.Unlock()
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	switch {
	case strings.EqualFold(q.Name, "web."+ns+".svc.cluster.local.") && q.Qtype == dns.TypeA:
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.ParseIP("10.96.0.10")})
	case q.Name == "big."+ns+".svc.cluster.local." && q.Qtype == dns.TypeTXT:
		for i := range 40 {
			m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 30}, Txt: []string{strings.Repeat(string(rune('a'+i%26)), 60)}})
		}
		if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
			m.Answer = m.Answer[:1]
			m.Truncated = true
		}
	default:
		m.Rcode = dns.RcodeNameError
	}
	_ = w.WriteMsg(m)
}

func (f *fakeCluster) queries() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

// serve starts h on loopback over UDP and TCP on one port and returns the address.
func serve(t *testing.T, h dns.Handler) string {
	t.Helper()
	// UDP and TCP on one port: an ephemeral UDP port's TCP twin may be taken; try again.
	var pc net.PacketConn
	var ln net.Listener
	for attempt := 0; ; attempt++ {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
		if attempt == 20 {
			t.Fatal(err)
		}
	}
	tcp := &dns.Server{Listener: ln, Handler: h}
	go func() { _ = tcp.ActivateAndServe() }()
	if srv, ok := h.(*Server); ok {
		// The sidecar's own UDP loop, fast path included.
		go func() { _ = srv.ServeUDP(pc.(*net.UDPConn)) }()
		t.Cleanup(func() { pc.Close(); _ = tcp.Shutdown() })
		return pc.LocalAddr().String()
	}
	udp := &dns.Server{PacketConn: pc, Handler: h}
	go func() { _ = udp.ActivateAndServe() }()
	t.Cleanup(func() { _ = udp.Shutdown(); _ = tcp.Shutdown() })
	return pc.LocalAddr().String()
}

func setup(t *testing.T, ipv6 bool) (string, *fakeCluster, *decisionlog.Log) {
	t.Helper()
	fc := &fakeCluster{}
	fc.addr = serve(t, fc)
	log := decisionlog.New("shop-pr-1", 100, nil)
	s := New(Config{
		Namespace: ns, ClusterDomain: "cluster.local", Services: []string{"web", "big"},
		ClusterResolver: fc.addr, AdvertiseV4: netip.MustParseAddr("198.18.7.1"),
		AdvertiseV6: netip.MustParseAddr("2001:db8::7"), IPv6: ipv6, Log: log,
	})
	return serve(t, s), fc, log
}

func exchange(t *testing.T, addr, netw, name string, qtype uint16, edns uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	if edns > 0 {
		m.SetEdns0(edns, false)
	}
	c := &dns.Client{Net: netw, Timeout: 3 * time.Second, UDPSize: 65535}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s over %s: %v", name, dns.TypeToString[qtype], netw, err)
	}
	if r.Id != m.Id {
		t.Fatalf("id %d, want %d", r.Id, m.Id)
	}
	return r
}

func TestExternalNamesAnswerWithTheSidecar(t *testing.T) {
	addr, fc, log := setup(t, false)
	for _, netw := range []string{"udp", "tcp"} {
		r := exchange(t, addr, netw, "api.stripe.com.", dns.TypeA, 0)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("A: %v", r)
		}
		a := r.Answer[0].(*dns.A)
		if a.A.String() != "198.18.7.1" || a.Hdr.Ttl != TTL || a.Hdr.Name != "api.stripe.com." {
			t.Errorf("A = %v", a)
		}
	}
	// Case is kept as asked (0x20 randomisation).
	if r := exchange(t, addr, "udp", "ApI.StRiPe.CoM.", dns.TypeA, 0); r.Question[0].Name != "ApI.StRiPe.CoM." || r.Answer[0].Header().Name != "ApI.StRiPe.CoM." {
		t.Errorf("case not kept: %v", r)
	}
	r := exchange(t, addr, "udp", "api.stripe.com.", dns.TypeAAAA, 0)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 || len(r.Ns) != 1 {
		t.Errorf("AAAA without IPv6: want empty NOERROR with SOA, got %v", r)
	}
	r = exchange(t, addr, "udp", "stripe.com.", dns.TypeMX, 0)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 {
		t.Errorf("MX: %v", r)
	}
	// Not one external name reached the cluster's resolver.
	if q := fc.queries(); len(q) != 0 {
		t.Errorf("external names forwarded: %v", q)
	}
	if e := log.Query(decisionlog.Filter{}); len(e) != 2 || e[0].Via != "dns" || e[0].Host != "api.stripe.com" || !e[0].Allowed || e[0].Client != "127.0.0.1" {
		t.Errorf("log = %+v (one entry per name a minute, each with the client that asked)", e)
	}
}

func TestIPv6Answer(t *testing.T) {
	addr, _, _ := setup(t, true)
	r := exchange(t, addr, "udp", "api.stripe.com.", dns.TypeAAAA, 0)
	if len(r.Answer) != 1 || r.Answer[0].(*dns.AAAA).AAAA.String() != "2001:db8::7" {
		t.Errorf("AAAA = %v", r)
	}
}

func TestEnvironmentNamesAreForwarded(t *testing.T) {
	addr, fc, _ := setup(t, false)
	for _, name := range []string{"web.", "web." + ns + ".", "web." + ns + ".svc.", "web." + ns + ".svc.cluster.local.", "WEB." + ns + ".svc.cluster.local."} {
		r := exchange(t, addr, "udp", name, dns.TypeA, 0)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "10.96.0.10" {
			t.Errorf("%s: %v", name, r)
			continue
		}
		if r.Answer[0].Header().Name != name {
			t.Errorf("%s: answer named %s", name, r.Answer[0].Header().Name)
		}
	}
	if q := fc.queries(); len(q) != 5 {
		t.Errorf("cluster resolver saw %v", q)
	}
	r := exchange(t, addr, "udp", "nope."+ns+".svc.cluster.local.", dns.TypeA, 0)
	if r.Rcode != dns.RcodeNameError {
		t.Errorf("missing internal name: %v", r)
	}
}

func TestNamesDoNotCrossEnvironments(t *testing.T) {
	addr, fc, log := setup(t, false)
	for _, name := range []string{"web.af-env-other.svc.cluster.local.", "kubernetes.default.svc.cluster.local.", "kubernetes.default.svc.", "cluster.local.", "10.0.96.10.in-addr.arpa.", "localhost.", "db."} {
		if r := exchange(t, addr, "udp", name, dns.TypeA, 0); r.Rcode != dns.RcodeNameError || len(r.Answer) != 0 {
			t.Errorf("%s: %v", name, r)
		}
	}
	if q := fc.queries(); len(q) != 0 {
		t.Errorf("forwarded: %v", q)
	}
	b := log.Query(decisionlog.Filter{Blocked: true})
	if len(b) != 7 {
		t.Errorf("blocked log = %d entries, want 7", len(b))
	}
	for _, e := range b {
		if e.Client != "127.0.0.1" {
			t.Errorf("blocked entry without the client that asked: %+v", e)
		}
	}
}

func TestRefusesWhatItShouldNotAnswer(t *testing.T) {
	addr, _, _ := setup(t, false)
	for _, qt := range []uint16{dns.TypeAXFR, dns.TypeIXFR, dns.TypeANY} {
		if r := exchange(t, addr, "tcp", "web."+ns+".svc.cluster.local.", qt, 0); r.Rcode != dns.RcodeRefused {
			t.Errorf("%s: rcode %s", dns.TypeToString[qt], dns.RcodeToString[r.Rcode])
		}
	}
	m := new(dns.Msg)
	m.SetQuestion("api.stripe.com.", dns.TypeA)
	m.Opcode = dns.OpcodeUpdate
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	if r, _, err := c.Exchange(m, addr); err != nil || r.Rcode != dns.RcodeNotImplemented {
		t.Errorf("UPDATE: %v %v", r, err)
	}
	m = new(dns.Msg)
	m.SetQuestion("api.stripe.com.", dns.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().SetVersion(1)
	if r, _, err := c.Exchange(m, addr); err != nil || r.Rcode != dns.RcodeBadVers {
		t.Errorf("EDNS version 1: %v %v", r, err)
	}
}

func TestTruncationAndEDNS(t *testing.T) {
	addr, fc, _ := setup(t, false)
	big := "big." + ns + ".svc.cluster.local."
	// Over TCP the whole answer arrives; the sidecar itself retried the resolver over TCP
	// when its UDP answer came back truncated.
	r := exchange(t, addr, "tcp", big, dns.TypeTXT, 0)
	if len(r.Answer) != 40 {
		t.Fatalf("TCP: %d answers", len(r.Answer))
	}
	// Over UDP without EDNS: at most 512 bytes, truncated.
	r = exchange(t, addr, "udp", big, dns.TypeTXT, 0)
	r.Compress = true // as it was sent
	if packed, _ := r.Pack(); len(packed) > 512 || !r.Truncated {
		t.Errorf("UDP no EDNS: %d bytes, TC %t", len(packed), r.Truncated)
	}
	if r.IsEdns0() != nil {
		t.Error("OPT in an answer to a query without one")
	}
	// Over UDP with EDNS 4096: capped at 1232, truncated, with an OPT record.
	r = exchange(t, addr, "udp", big, dns.TypeTXT, 4096)
	r.Compress = true
	if packed, _ := r.Pack(); len(packed) > maxUDP || !r.Truncated || r.IsEdns0() == nil || len(r.Answer) < 2 {
		t.Errorf("UDP EDNS: %d bytes, TC %t, OPT %v, %d answers", len(packed), r.Truncated, r.IsEdns0(), len(r.Answer))
	}
	var udpThenTCP int
	for _, q := range fc.queries() {
		if q == big {
			udpThenTCP++
		}
	}
	if udpThenTCP < 4 {
		t.Errorf("resolver saw %d queries for the big name; UDP answers were not retried over TCP", udpThenTCP)
	}
}

func TestResolverDownIsServfail(t *testing.T) {
	s := New(Config{Namespace: ns, ClusterDomain: "cluster.local", Services: []string{"web"}, ClusterResolver: "127.0.0.1:1", AdvertiseV4: netip.MustParseAddr("198.18.7.1"), ForwardTimeout: 200 * time.Millisecond})
	m := new(dns.Msg)
	m.SetQuestion("web.", dns.TypeA)
	if r := s.Answer(context.Background(), m, "udp"); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("rcode %s", dns.RcodeToString[r.Rcode])
	}
}

// TestDig asks with dig, a real resolver client, as a person would.
func TestDig(t *testing.T) {
	testreq.Tools(t, "dig") // make test installs bind9-dnsutils
	addr, _, _ := setup(t, false)
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command("dig", "@"+host, "-p", port, "+short", "api.stripe.com", "A").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "198.18.7.1" {
		t.Errorf("dig external: %v %q", err, out)
	}
	out, err = exec.Command("dig", "@"+host, "-p", port, "+short", "web", "A").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "10.96.0.10" {
		t.Errorf("dig short service name: %v %q", err, out)
	}
	out, _ = exec.Command("dig", "@"+host, "-p", port, "+tcp", "web."+ns+".svc.cluster.local", "AXFR").CombinedOutput()
	if !strings.Contains(string(out), "Transfer failed") && !strings.Contains(string(out), "REFUSED") {
		t.Errorf("dig axfr: %s", out)
	}
	out, _ = exec.Command("dig", "@"+host, "-p", port, "web.af-env-other.svc.cluster.local", "A").CombinedOutput()
	if !strings.Contains(string(out), "NXDOMAIN") {
		t.Errorf("dig other environment: %s", out)
	}
	// dig falls back to TCP by itself on a truncated answer and gets all 40 records.
	out, err = exec.Command("dig", "@"+host, "-p", port, "+short", "big."+ns+".svc.cluster.local", "TXT").CombinedOutput()
	if err != nil || strings.Count(string(out), "\n") != 40 {
		t.Errorf("dig big TXT: %v, %d lines", err, strings.Count(string(out), "\n"))
	}
}
