package dnsserver

import (
	"context"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/antifailure/af/sidecar/decisionlog"
)

func BenchmarkAnswerExternal(b *testing.B) {
	s := New(Config{Namespace: ns, ClusterDomain: "cluster.local", Services: []string{"web"}, ClusterResolver: "127.0.0.1:1", AdvertiseV4: netip.MustParseAddr("198.18.7.1"), Log: decisionlog.New("b", 1000, nil)})
	m := new(dns.Msg)
	m.SetQuestion("api.example.test.", dns.TypeA)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := s.Answer(ctx, m, "udp"); len(r.Answer) != 1 {
			b.Fatal(r)
		}
	}
}

func BenchmarkAnswerForwarded(b *testing.B) {
	fc := &fakeCluster{}
	addr := serveBench(b, fc)
	s := New(Config{Namespace: ns, ClusterDomain: "cluster.local", Services: []string{"web"}, ClusterResolver: addr, AdvertiseV4: netip.MustParseAddr("198.18.7.1")})
	m := new(dns.Msg)
	m.SetQuestion("web."+ns+".svc.cluster.local.", dns.TypeA)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := s.Answer(ctx, m, "udp"); len(r.Answer) != 1 {
			b.Fatal(r)
		}
	}
}

func serveBench(b *testing.B, h dns.Handler) string {
	b.Helper()
	srv := &dns.Server{Addr: "127.0.0.1:0", Net: "udp", Handler: h}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ListenAndServe() }()
	<-started
	b.Cleanup(func() { _ = srv.Shutdown() })
	return srv.PacketConn.LocalAddr().String()
}

// BenchmarkFastExternal is the UDP loop's own work for the common query (an external name's A
// record), without the socket: parse, decide, answer, record.
func BenchmarkFastExternal(b *testing.B) {
	s := New(Config{Namespace: ns, ClusterDomain: "cluster.local", Services: []string{"web"}, ClusterResolver: "127.0.0.1:1", AdvertiseV4: netip.MustParseAddr("198.18.7.1"), Log: decisionlog.New("b", 1000, nil)})
	m := new(dns.Msg)
	m.SetQuestion("api.example.test.", dns.TypeA)
	pkt, _ := m.Pack()
	out := make([]byte, 0, 512)
	client := netip.MustParseAddr("10.244.0.9")
	b.ReportAllocs()
	for b.Loop() {
		if _, v, _ := s.fast(pkt, out[:0], client); v != fastAnswered {
			b.Fatal(v)
		}
	}
}

// BenchmarkFastCached is a repeated lookup of one of the environment's own names answered from
// the cache.
func BenchmarkFastCached(b *testing.B) {
	s := New(Config{Namespace: ns, ClusterDomain: "cluster.local", Services: []string{"web"}, ClusterResolver: "127.0.0.1:1", AdvertiseV4: netip.MustParseAddr("198.18.7.1")})
	m := new(dns.Msg)
	m.SetQuestion("web."+ns+".svc.cluster.local.", dns.TypeA)
	pkt, _ := m.Pack()
	r := new(dns.Msg)
	r.SetReply(m)
	r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: m.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: netip.MustParseAddr("10.96.0.10").AsSlice()})
	resp, _ := r.Pack()
	c := newAnswerCache(16)
	out := make([]byte, 0, 512)
	client := netip.MustParseAddr("10.244.0.9")
	_, _, qEnd := s.fast(pkt, out[:0], client)
	c.store(pkt[12:qEnd], resp)
	b.ReportAllocs()
	for b.Loop() {
		_, v, qEnd := s.fast(pkt, out[:0], client)
		if v != fastForward || c.answer(pkt, qEnd, out[:0]) == nil {
			b.Fatal(v)
		}
	}
}
