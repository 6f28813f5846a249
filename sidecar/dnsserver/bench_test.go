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
