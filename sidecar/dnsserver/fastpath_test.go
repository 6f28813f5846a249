package dnsserver

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/antifailure/af/internal/testreq"
	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

func fastServer() *Server {
	return New(Config{Namespace: ns, ClusterDomain: "cluster.local", Services: []string{"web"}, ClusterResolver: "127.0.0.1:9", AdvertiseV4: netip.MustParseAddr("198.18.7.1")})
}

// sameAnswer reports whether the fast path's bytes say what the full path says.
func sameAnswer(t *testing.T, s *Server, pkt []byte) {
	t.Helper()
	fast, ok := s.fastAnswer(pkt, nil)
	if !ok {
		t.Fatalf("fast path declined %x", pkt)
	}
	var q, got dns.Msg
	if err := q.Unpack(pkt); err != nil {
		t.Fatalf("the fast path took a packet that does not unpack: %v", err)
	}
	if err := got.Unpack(fast); err != nil {
		t.Fatalf("the fast path's answer does not unpack: %v", err)
	}
	want := s.Answer(context.Background(), &q, "udp")
	if got.Id != want.Id || got.Response != want.Response || got.RecursionDesired != want.RecursionDesired ||
		got.RecursionAvailable != want.RecursionAvailable || got.Rcode != want.Rcode || got.Opcode != want.Opcode ||
		len(got.Answer) != len(want.Answer) || len(got.Question) != 1 || got.Question[0] != want.Question[0] {
		t.Fatalf("fast %v\nfull %v", &got, want)
	}
	if len(got.Answer) == 1 && got.Answer[0].String() != want.Answer[0].String() {
		t.Fatalf("fast answer %v, full answer %v", got.Answer[0], want.Answer[0])
	}
}

func TestFastPathMatchesFullPath(t *testing.T) {
	s := fastServer()
	for _, name := range []string{"api.stripe.com.", "API.Stripe.COM.", "a.b.c.d.e.example.test."} {
		for _, rd := range []bool{true, false} {
			m := new(dns.Msg)
			m.SetQuestion(name, dns.TypeA)
			m.RecursionDesired = rd
			pkt, _ := m.Pack()
			sameAnswer(t, s, pkt)
		}
	}
}

func TestFastPathDeclines(t *testing.T) {
	s := fastServer()
	pack := func(f func(m *dns.Msg)) []byte {
		m := new(dns.Msg)
		m.SetQuestion("api.stripe.com.", dns.TypeA)
		f(m)
		b, _ := m.Pack()
		return b
	}
	for name, pkt := range map[string][]byte{
		"internal name":      pack(func(m *dns.Msg) { m.Question[0].Name = "web." }),
		"other environment":  pack(func(m *dns.Msg) { m.Question[0].Name = "web.af-env-other.svc.cluster.local." }),
		"EDNS":               pack(func(m *dns.Msg) { m.SetEdns0(1232, false) }),
		"AAAA":               pack(func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeAAAA }),
		"AXFR":               pack(func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeAXFR }),
		"class CH":           pack(func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }),
		"a response":         pack(func(m *dns.Msg) { m.Response = true }),
		"UPDATE":             pack(func(m *dns.Msg) { m.Opcode = dns.OpcodeUpdate }),
		"two questions":      pack(func(m *dns.Msg) { m.Question = append(m.Question, m.Question[0]) }),
		"escaped label":      pack(func(m *dns.Msg) { m.Question[0].Name = `a\.b.example.test.` }),
		"root":               pack(func(m *dns.Msg) { m.Question[0].Name = "." }),
		"truncated question": pack(func(*dns.Msg) {})[:20],
	} {
		if _, ok := s.fastAnswer(pkt, nil); ok {
			t.Errorf("%s: taken by the fast path", name)
		}
	}
}

// FuzzFastAnswer: whatever the fast path takes must unpack and say what the full path says.
func FuzzFastAnswer(f *testing.F) {
	m := new(dns.Msg)
	m.SetQuestion("api.stripe.com.", dns.TypeA)
	b, _ := m.Pack()
	f.Add(b)
	s := fastServer()
	f.Fuzz(func(t *testing.T, pkt []byte) {
		if _, ok := s.fastAnswer(pkt, nil); !ok {
			return
		}
		sameAnswer(t, s, pkt)
	})
}

// TestRelayAnswersServfailWhenTheResolverIsSilent: a relayed query the resolver never answers
// gets SERVFAIL, not silence.
func TestRelayAnswersServfailWhenTheResolverIsSilent(t *testing.T) {
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	s := New(Config{Namespace: ns, ClusterDomain: "cluster.local", ClusterResolver: silent.LocalAddr().String(), AdvertiseV4: netip.MustParseAddr("198.18.7.1"), ForwardTimeout: 300 * time.Millisecond})
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.ServeUDP(pc) }()
	defer pc.Close()
	m := new(dns.Msg)
	m.SetQuestion("web."+ns+".svc.cluster.local.", dns.TypeA)
	c := &dns.Client{Net: "udp", Timeout: 3 * time.Second}
	start := time.Now()
	r, _, err := c.Exchange(m, pc.LocalAddr().String())
	if err != nil || r.Rcode != dns.RcodeServerFailure || r.Id != m.Id || r.Question[0].Name != m.Question[0].Name {
		t.Fatalf("%v %v", r, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("SERVFAIL after %v", d)
	}
	// The silent resolver did receive the query, under an id other than the client's.
	buf := make([]byte, 512)
	_ = silent.SetReadDeadline(time.Now().Add(time.Second))
	n, _, err := silent.ReadFrom(buf)
	if err != nil || n < 12 {
		t.Fatalf("resolver saw nothing: %v", err)
	}
	var fwd dns.Msg
	if err := fwd.Unpack(buf[:n]); err != nil || fwd.Question[0].Name != m.Question[0].Name {
		t.Fatalf("forwarded %v %v", &fwd, err)
	}
}

// The UDP loops answer many queries at once on every kind of socket the sidecar may open (the
// batched loop with its shared relay on IPv4 and dual-stack sockets, the plain loop with its
// relay's own socket on an IPv6 one), each with its own id and question:
// own-address answers, relayed names the resolver does not know (never kept, so each one is
// relayed) and one it knows.
func TestUDPLoopsUnderLoad(t *testing.T) {
	fc := &fakeCluster{}
	fc.addr = serve(t, fc)
	// An IPv4 socket; an IPv6 one; the dual-stack one ":53" opens, asked over IPv4 (mapped
	// addresses in, IPv4 answers out) and over IPv6.
	for _, c := range []struct{ listen, ask string }{
		{"127.0.0.1:0", "127.0.0.1"}, {"[::1]:0", "::1"}, {":0", "127.0.0.1"}, {":0", "::1"},
	} {
		t.Run(c.listen+" asked at "+c.ask, func(t *testing.T) {
			pc, err := net.ListenPacket("udp", c.listen)
			if err != nil {
				testreq.Missing(t, "no %s here: %v", c.listen, err)
			}
			defer pc.Close()
			// An IPv6-only socket cannot reach an IPv4 resolver from itself: the plain loop.
			if b := batchable(pc.(*net.UDPConn), fc.addr); b != (c.listen != "[::1]:0") {
				t.Fatalf("batchable(%s) = %v", c.listen, b)
			}
			ask := net.JoinHostPort(c.ask, strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port))
			s := New(Config{Namespace: ns, ClusterDomain: "cluster.local", Services: []string{"web"}, ClusterResolver: fc.addr,
				AdvertiseV4: netip.MustParseAddr("198.18.7.1")})
			go func() { _ = s.ServeUDP(pc.(*net.UDPConn)) }()
			var wg sync.WaitGroup
			errs := make(chan error, 300)
			inFlight := make(chan struct{}, 32) // at most 32 queries outstanding, as dnsperf -q 32
			for i := range 300 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					inFlight <- struct{}{}
					defer func() { <-inFlight }()
					name, want := fmt.Sprintf("nope-%d.%s.svc.cluster.local.", i, ns), dns.RcodeNameError
					switch i % 3 {
					case 1:
						name, want = fmt.Sprintf("api-%d.example.test.", i), dns.RcodeSuccess
					case 2:
						name, want = "web."+ns+".svc.cluster.local.", dns.RcodeSuccess
					}
					m := new(dns.Msg)
					m.SetQuestion(name, dns.TypeA)
					r, err := askAgain(m, ask)
					switch {
					case err != nil:
						errs <- fmt.Errorf("%s: %v", name, err)
					case r.Id != m.Id || r.Rcode != want || len(r.Question) != 1 || r.Question[0].Name != name:
						errs <- fmt.Errorf("%s: id %d/%d rcode %d/%d question %v", name, r.Id, m.Id, r.Rcode, want, r.Question)
					case want == dns.RcodeSuccess && (len(r.Answer) != 1 || r.Answer[0].Header().Name != name):
						errs <- fmt.Errorf("%s: answer %v", name, r.Answer)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// Several sockets on one port (SO_REUSEPORT, as the sidecar opens one per CPU) share one
// relay: a relayed query goes out from the socket its client wrote to, and its answer may
// arrive at another (the kernel picks by the resolver's address); every client still gets its
// own answer from the port it asked.
func TestSharedRelayAcrossSockets(t *testing.T) {
	fc := &fakeCluster{}
	fc.addr = serve(t, fc)
	reuse := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, unix.SO_REUSEPORT, 1) }); err != nil {
			return err
		}
		return serr
	}}
	first, err := reuse.ListenPacket(context.Background(), "udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	socks := []net.PacketConn{first}
	for range 3 {
		pc, err := reuse.ListenPacket(context.Background(), "udp", first.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		socks = append(socks, pc)
	}
	s := New(Config{Namespace: ns, ClusterDomain: "cluster.local", Services: []string{"web"}, ClusterResolver: fc.addr,
		AdvertiseV4: netip.MustParseAddr("198.18.7.1")})
	var loops sync.WaitGroup
	for _, pc := range socks {
		loops.Add(1)
		go func() { defer loops.Done(); _ = s.ServeUDP(pc.(*net.UDPConn)) }()
	}
	var wg sync.WaitGroup
	for i := range 64 { // 64 clients, 64 source ports: spread over the four sockets
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("nope-%d.%s.svc.cluster.local.", i, ns)
			m := new(dns.Msg)
			m.SetQuestion(name, dns.TypeA)
			r, err := askAgain(m, first.LocalAddr().String())
			if err != nil || r.Id != m.Id || r.Rcode != dns.RcodeNameError || r.Question[0].Name != name {
				t.Errorf("%s: %v %v", name, r, err)
			}
		}()
	}
	wg.Wait()
	fc.mu.Lock()
	relayed := len(fc.seen)
	fc.mu.Unlock()
	if relayed < 64 {
		t.Fatalf("the resolver saw %d queries, want at least 64 (each name relayed)", relayed)
	}
	for _, pc := range socks {
		pc.Close()
	}
	loops.Wait()
	s.sharedMu.Lock()
	defer s.sharedMu.Unlock()
	if s.shared != nil || s.loops != 0 {
		t.Fatalf("the shared relay outlived its loops: %v, %d loops", s.shared, s.loops)
	}
}

// askAgain asks m over UDP up to three times: a datagram can be lost when a socket's buffer is
// full (the race detector slows the loops), and a stub resolver asks again too.
func askAgain(m *dns.Msg, addr string) (*dns.Msg, error) {
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	var r *dns.Msg
	var err error
	for try := 0; try < 3; try++ {
		if r, _, err = c.Exchange(m, addr); err == nil {
			break
		}
	}
	return r, err
}

// Identical queries in flight share one upstream query, on both loops: the resolver sees one
// query per question and answer-shaping flags (and one more per maxJoin clients), each client
// gets the answer under its own id, a query that differs in case or in RD is its own, nothing
// is kept at TTL 0, and when the resolver stays silent every client that joined gets SERVFAIL.
func TestIdenticalQueriesInFlightShareOne(t *testing.T) {
	for _, listen := range []string{"127.0.0.1:0", "[::1]:0"} { // the batched loop; the plain one
		t.Run(listen, func(t *testing.T) {
			resolver, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer resolver.Close()
			pc, err := net.ListenPacket("udp", listen)
			if err != nil {
				testreq.Missing(t, "no %s here: %v", listen, err)
			}
			defer pc.Close()
			s := New(Config{Namespace: ns, ClusterDomain: "cluster.local", Services: []string{"web"}, ClusterResolver: resolver.LocalAddr().String(),
				AdvertiseV4: netip.MustParseAddr("198.18.7.1"), ForwardTimeout: 500 * time.Millisecond})
			go func() { _ = s.ServeUDP(pc.(*net.UDPConn)) }()
			name := "web." + ns + ".svc.cluster.local."
			type client struct {
				c *net.UDPConn
				m *dns.Msg
			}
			ask := func(qname string, rd bool) client {
				c, err := net.DialUDP("udp", nil, pc.LocalAddr().(*net.UDPAddr))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				m := new(dns.Msg)
				m.SetQuestion(qname, dns.TypeA)
				m.RecursionDesired = rd
				b, _ := m.Pack()
				if _, err := c.Write(b); err != nil {
					t.Fatal(err)
				}
				return client{c, m}
			}
			var clients []client
			for range maxJoin + 6 {
				clients = append(clients, ask(name, true))
			}
			clients = append(clients, ask(name, false), ask(strings.ToUpper(name[:3])+name[3:], true))
			// What reaches the resolver while it has answered nothing.
			got := upstreamQueries(t, resolver)
			want := map[string]int{name + " rd": 2, name + " no-rd": 1, "WEB" + name[3:] + " rd": 1}
			if counts := countQueries(got); !maps.Equal(counts, want) {
				t.Fatalf("the resolver saw %v, want %v", counts, want)
			}
			for _, q := range got {
				r := new(dns.Msg)
				r.SetReply(&q.m)
				r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.m.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 0}, A: net.ParseIP("10.96.0.10")})
				b, _ := r.Pack()
				if _, err := resolver.WriteToUDPAddrPort(b, q.from); err != nil {
					t.Fatal(err)
				}
			}
			for i, c := range clients {
				r := readAnswer(t, c.c)
				if r.Id != c.m.Id || r.Rcode != dns.RcodeSuccess || r.Question[0] != c.m.Question[0] || r.RecursionDesired != c.m.RecursionDesired ||
					len(r.Answer) != 1 || r.Answer[0].Header().Name != c.m.Question[0].Name {
					t.Fatalf("client %d asked %v, was answered %v", i, c.m, r)
				}
			}
			// TTL 0: nothing was kept, the next one is asked again.
			again := ask(name, true)
			if got := upstreamQueries(t, resolver); len(got) != 1 {
				t.Fatalf("after the answers, the resolver saw %d queries for one more, want 1", len(got))
			}
			// Silence: the query that was asked again and one that joins it both get SERVFAIL.
			joined := ask(name, true)
			for _, c := range []client{again, joined} {
				if r := readAnswer(t, c.c); r.Id != c.m.Id || r.Rcode != dns.RcodeServerFailure || r.Question[0] != c.m.Question[0] {
					t.Fatalf("asked %v of a silent resolver, was answered %v", c.m, r)
				}
			}
			if got := upstreamQueries(t, resolver); len(got) != 0 {
				t.Fatalf("the query that joined went upstream too: %d queries", len(got))
			}
		})
	}
}

type upstreamQuery struct {
	m    dns.Msg
	from netip.AddrPort
}

// upstreamQueries reads what reaches the resolver until it has been quiet for 300 ms.
func upstreamQueries(t *testing.T, resolver *net.UDPConn) []upstreamQuery {
	t.Helper()
	var got []upstreamQuery
	buf := make([]byte, 4096)
	for {
		_ = resolver.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, from, err := resolver.ReadFromUDPAddrPort(buf)
		if err != nil {
			return got
		}
		var q upstreamQuery
		if err := q.m.Unpack(buf[:n]); err != nil {
			t.Fatalf("the resolver got %x: %v", buf[:n], err)
		}
		q.from = from
		got = append(got, q)
	}
}

func countQueries(qs []upstreamQuery) map[string]int {
	counts := map[string]int{}
	for _, q := range qs {
		rd := " no-rd"
		if q.m.RecursionDesired {
			rd = " rd"
		}
		counts[q.m.Question[0].Name+rd]++
	}
	return counts
}

func readAnswer(t *testing.T, c *net.UDPConn) *dns.Msg {
	t.Helper()
	buf := make([]byte, 4096)
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	r := new(dns.Msg)
	if err := r.Unpack(buf[:n]); err != nil {
		t.Fatal(err)
	}
	return r
}

// fastAnswer answers pkt into out when it is a plain query for an external name's A record.
func (s *Server) fastAnswer(pkt, out []byte) ([]byte, bool) {
	resp, v, _ := s.fast(pkt, out, netip.Addr{})
	return resp, v == fastAnswered
}
