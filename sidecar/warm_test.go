package sidecar

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/antifailure/af/sidecar/config"
)

// TestReadyOnlyOnceTheResolverAnswers: the sidecar says it is ready (/healthz) only once the
// cluster resolver has answered a name of the environment's zone through the DNS relay, from
// the relay's own port, so the first lookup a pod makes finds that path open. The resolver
// here stays silent at first, as the first packet of a flow waits under an enforcer that
// decides new connections in userspace; the sidecar stays unready meanwhile, becomes ready
// once it answers, and the first lookup of a service's name is then answered.
func TestReadyOnlyOnceTheResolverAnswers(t *testing.T) {
	var (
		mu      sync.Mutex
		release = make(chan struct{})
		asked   []string
		from    []int
	)
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		mu.Lock()
		asked = append(asked, r.Question[0].Name)
		from = append(from, w.RemoteAddr().(*net.UDPAddr).Port)
		mu.Unlock()
		select {
		case <-release:
		default:
			return // silence: the verdict has not come
		}
		m := new(dns.Msg)
		m.SetReply(r)
		if r.Question[0].Name == "web.af-env-t.svc.cluster.local." {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP("198.18.255.7")})
		} else {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})
	cfg := config.Config{
		Environment: "t-pr-1", Namespace: "af-env-t", Services: []string{"web"},
		ClusterResolver: listenDNS(t, h), AdvertiseIPv4: "127.0.0.1",
		Listen: config.Listen{DNS: "127.0.0.1:0", Control: "127.0.0.1:0"},
	}
	res, err := cfg.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := Start(context.Background(), res, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sc.Shutdown(ctx)
	})
	healthz := func() int {
		resp, err := http.Get("http://" + sc.Addr(Control).String() + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// Silent resolver: asked, and not ready.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		n := len(asked)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sidecar never asked the cluster resolver before saying it is ready")
		}
	}
	if code := healthz(); code != http.StatusServiceUnavailable {
		t.Fatalf("/healthz %d while the cluster resolver is silent, want 503", code)
	}
	close(release)
	for deadline := time.Now().Add(15 * time.Second); healthz() != http.StatusOK; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not ready after the cluster resolver answered")
		}
	}
	mu.Lock()
	dnsPort := sc.Addr(DNS).(*net.UDPAddr).Port
	if asked[0] != "af-warm.af-env-t.svc.cluster.local." || from[0] != dnsPort {
		t.Errorf("first question %q from port %d, want af-warm.af-env-t.svc.cluster.local. from the DNS listener's port %d", asked[0], from[0], dnsPort)
	}
	mu.Unlock()
	c := &dns.Client{Net: "udp", Timeout: 3 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion("web.af-env-t.svc.cluster.local.", dns.TypeA)
	r, _, err := c.Exchange(m, net.JoinHostPort("127.0.0.1", strconv.Itoa(dnsPort)))
	if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("the first lookup after ready: %v %v", r, err)
	}
}
