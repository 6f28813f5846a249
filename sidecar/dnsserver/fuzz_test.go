package dnsserver

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// FuzzAnswer feeds arbitrary wire messages to the handler. It must not panic; a response must
// pack, keep the query's id, and fit the size the client can take over UDP.
func FuzzAnswer(f *testing.F) {
	for _, q := range []struct {
		name  string
		qtype uint16
		edns  uint16
	}{{"api.stripe.com.", dns.TypeA, 0}, {"web.", dns.TypeA, 1232}, {"x.af-env-t.svc.cluster.local.", dns.TypeTXT, 4096}, {"a.b.", dns.TypeAXFR, 0}, {"x.", dns.TypeAAAA, 512}} {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.qtype)
		if q.edns > 0 {
			m.SetEdns0(q.edns, true)
		}
		b, _ := m.Pack()
		f.Add(b, true)
	}
	// The cluster resolver is a closed loopback port: forwarding fails fast with SERVFAIL.
	s := New(Config{Namespace: "af-env-t", ClusterDomain: "cluster.local", Services: []string{"web"}, ClusterResolver: "127.0.0.1:9", AdvertiseV4: netip.MustParseAddr("198.18.7.1"), ForwardTimeout: 20 * time.Millisecond})
	f.Fuzz(func(t *testing.T, wire []byte, udp bool) {
		var r dns.Msg
		if err := r.Unpack(wire); err != nil {
			return
		}
		proto := "tcp"
		if udp {
			proto = "udp"
		}
		resp := s.Answer(context.Background(), &r, proto)
		if resp == nil {
			if !r.Response {
				t.Fatal("no answer to a query")
			}
			return
		}
		packed, err := resp.Pack()
		if err != nil {
			t.Fatalf("response does not pack: %v\n%v", err, resp)
		}
		if resp.Id != r.Id {
			t.Fatalf("id %d, want %d", resp.Id, r.Id)
		}
		if udp && resp.Rcode != dns.RcodeBadVers {
			limit := dns.MinMsgSize
			if o := r.IsEdns0(); o != nil {
				limit = max(limit, min(int(o.UDPSize()), maxUDP))
			}
			if len(packed) > limit {
				t.Fatalf("UDP response of %d bytes, limit %d", len(packed), limit)
			}
		}
	})
}
