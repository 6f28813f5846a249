package dnsserver

import (
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// answerWire packs a response to q with one A record of ttl, as the cluster resolver would.
func answerWire(t *testing.T, q *dns.Msg, ttl uint32, rcode int, compress bool) []byte {
	t.Helper()
	m := new(dns.Msg)
	m.SetReply(q)
	m.Rcode = rcode
	m.Compress = compress
	if rcode == dns.RcodeSuccess {
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.ParseIP("10.96.0.10")})
	}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func queryWire(t *testing.T, name string, id uint16) ([]byte, int) {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	q.Id = id
	b, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b, len(b) // one question, nothing after it
}

func TestAnswerCache(t *testing.T) {
	now := time.Unix(1000, 0)
	c := newAnswerCache(2)
	c.now = func() time.Time { return now }
	name := "web." + ns + ".svc.cluster.local."
	first, qEnd := queryWire(t, name, 1)
	var q dns.Msg
	if err := q.Unpack(first); err != nil {
		t.Fatal(err)
	}
	for _, compress := range []bool{false, true} {
		c.store(first[12:qEnd], answerWire(t, &q, 5, dns.RcodeSuccess, compress))
		// Three seconds later, another client asks: its id, the TTL less the three seconds.
		now = now.Add(3 * time.Second)
		again, _ := queryWire(t, name, 0xbeef)
		resp := c.answer(again, qEnd, nil)
		var m dns.Msg
		if resp == nil || m.Unpack(resp) != nil {
			t.Fatalf("compress %v: no cached answer", compress)
		}
		if m.Id != 0xbeef || len(m.Answer) != 1 || m.Answer[0].Header().Ttl != 2 || m.Answer[0].(*dns.A).A.String() != "10.96.0.10" {
			t.Errorf("compress %v: cached answer %v", compress, &m)
		}
		// At its TTL it is gone: the resolver is asked again.
		now = now.Add(2 * time.Second)
		if c.answer(again, qEnd, nil) != nil {
			t.Errorf("compress %v: answered past its TTL", compress)
		}
	}
	// A denial, a TTL of 0 and a truncated answer are never kept; nor is another spelling served.
	c.store(first[12:qEnd], answerWire(t, &q, 5, dns.RcodeNameError, false))
	c.store(first[12:qEnd], answerWire(t, &q, 0, dns.RcodeSuccess, false))
	tc := answerWire(t, &q, 5, dns.RcodeSuccess, false)
	tc[2] |= 0x02
	c.store(first[12:qEnd], tc)
	if c.answer(first, qEnd, nil) != nil {
		t.Errorf("kept a denial, a zero TTL or a truncated answer")
	}
	c.store(first[12:qEnd], answerWire(t, &q, 5, dns.RcodeSuccess, false))
	upper, uEnd := queryWire(t, "WEB."+ns+".svc.cluster.local.", 2)
	if c.answer(upper, uEnd, nil) != nil {
		t.Errorf("answered a query spelled otherwise from the cache")
	}
	// A long TTL is kept at most maxCacheTTL.
	c.store(first[12:qEnd], answerWire(t, &q, 3600, dns.RcodeSuccess, false))
	now = now.Add(maxCacheTTL)
	if c.answer(first, qEnd, nil) != nil {
		t.Errorf("kept longer than %s", maxCacheTTL)
	}
}

// Through the sidecar's UDP loop: a repeated lookup of a service's name reaches the cluster's
// resolver once; a name that does not exist reaches it every time.
func TestRepeatedLookupsAreCached(t *testing.T) {
	addr, fc, _ := setup(t, false)
	name := "web." + ns + ".svc.cluster.local."
	for range 3 {
		r := exchange(t, addr, "udp", name, dns.TypeA, 0)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].Header().Ttl > 30 {
			t.Fatalf("%v", r)
		}
	}
	missing := "nope." + ns + ".svc.cluster.local."
	for range 2 {
		if r := exchange(t, addr, "udp", missing, dns.TypeA, 0); r.Rcode != dns.RcodeNameError {
			t.Fatalf("%v", r)
		}
	}
	count := map[string]int{}
	for _, q := range fc.queries() {
		count[q]++
	}
	if count[name] != 1 || count[missing] != 2 {
		t.Errorf("the cluster resolver saw %v: want the service's name once, the missing one twice", count)
	}
}

// FuzzRecordTTLs: whatever the resolver sends, walking its records stays inside the message
// and every TTL offset found is one a TTL fits at.
func FuzzRecordTTLs(f *testing.F) {
	q := new(dns.Msg)
	q.SetQuestion("web."+ns+".svc.cluster.local.", dns.TypeA)
	r := new(dns.Msg)
	r.SetReply(q)
	r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP("10.0.0.1")})
	r.Compress = true
	b, _ := r.Pack()
	f.Add(b)
	f.Fuzz(func(t *testing.T, msg []byte) {
		if len(msg) < 12 {
			return
		}
		offs, _, ok := recordTTLs(msg, 12)
		for _, o := range offs {
			if ok && (o < 12 || o+4 > len(msg)) {
				t.Fatalf("TTL offset %d outside a %d-byte message", o, len(msg))
			}
		}
		c := newAnswerCache(4)
		c.store(nil, msg)
	})
}
