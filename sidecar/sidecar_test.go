package sidecar

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/antifailure/af/internal/testcert"
	"github.com/antifailure/af/internal/testnet"
	"github.com/antifailure/af/internal/testreq"
	"github.com/antifailure/af/manifest"
	"github.com/antifailure/af/sidecar/config"
	"github.com/antifailure/af/sidecar/decisionlog"
	"github.com/antifailure/af/sidecar/inbox"
)

// world is a sidecar between a client host and an upstream "internet" host, both network
// namespaces this test made. The client resolves through the sidecar; the sidecar resolves
// external names through a fake upstream DNS server on loopback.
type world struct {
	t      *testing.T
	client *testnet.Host
	up     *testnet.Host
	ca     *testcert.CA
	sc     *Sidecar
	out    *syncBuffer
	ctl    string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// upstream answers with what it received, as JSON.
func upstream(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"server": name, "host": r.Host, "path": r.URL.Path, "method": r.Method, "body": len(body), "tls": r.TLS != nil})
	})
}

func serveDNS(t *testing.T, table map[string]string) string {
	t.Helper()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		if ip, ok := table[strings.ToLower(q.Name)]; ok && q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP(ip)})
		} else if !ok {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})
	return listenDNS(t, h)
}

// listenDNS serves h on a loopback UDP port for the test and returns its address.
func listenDNS(t *testing.T, h dns.Handler) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: h}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

func newWorld(t *testing.T, mutate func(*config.Config)) *world {
	t.Helper()
	n := testnet.New(t)
	w := &world{t: t, client: n.Host("client"), up: n.Host("up"), ca: testcert.NewCA(t), out: &syncBuffer{}}
	// The upstream host: plain HTTP on 80, TLS on 443 and 8443 for the test names.
	cert := w.ca.Server(t, "api.allowed.test", "blocked.test", "tls.allowed.test")
	go func() { _ = http.Serve(w.up.Listen(":80"), upstream("up:80")) }()
	tlsLn := tls.NewListener(w.up.Listen(":443"), &tls.Config{Certificates: []tls.Certificate{cert}})
	go func() { _ = http.Serve(tlsLn, upstream("up:443")) }()
	tlsLn2 := tls.NewListener(w.up.Listen(":8443"), &tls.Config{Certificates: []tls.Certificate{cert}})
	go func() { _ = http.Serve(tlsLn2, upstream("up:8443")) }()

	upAddr := w.up.Addr.String()
	resolver := serveDNS(t, map[string]string{
		"api.allowed.test.":    upAddr,
		"tls.allowed.test.":    upAddr,
		"blocked.test.":        upAddr,
		"loop.allowed.test.":   "127.0.0.1",
		"meta.allowed.test.":   "169.254.77.1", // link-local, but not the metadata address
		"rebind.allowed.test.": "10.0.0.9",
	})
	clusterDNS := serveDNS(t, map[string]string{"web.af-env-t.svc.cluster.local.": "198.18.255.7"})
	peer := w.client.Peer.String()
	cfg := config.Config{
		Environment: "t-pr-1", Namespace: "af-env-t", Services: []string{"web"},
		ClusterResolver: clusterDNS, UpstreamResolver: resolver, AdvertiseIPv4: peer,
		ClusterCIDRs: []string{"198.18.255.0/24"},
		Egress: manifest.Egress{Default: "block", Rules: []manifest.EgressRule{
			{Host: "api.allowed.test"},
			{Host: "tls.allowed.test"},
			{Host: "*.allowed.test", Ports: []int{80, 443}},
			{Host: "*.capture.test", Mode: "capture"},
		}},
		Listen: config.Listen{Proxy: peer + ":3128", HTTP: peer + ":80", HTTPS: peer + ":443", DNS: peer + ":53", SMTP: []string{peer + ":25", peer + ":587"}, Control: "127.0.0.1:0"},
		Limits: config.Limits{HandshakeTimeout: "2s", IdleTimeout: "5s", InboxBodyBytes: 1024},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	res, err := cfg.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := Start(context.Background(), res, w.out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	w.sc = sc
	w.ctl = "http://" + sc.Addr(Control).String()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sc.Shutdown(ctx)
	})
	w.client.SetResolver(w.client.Peer)
	return w
}

// run runs a command inside the client host and returns its output.
func (w *world) run(env []string, name string, args ...string) (string, error) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := w.client.Command(ctx, name, args...)
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (w *world) log(f string) []decisionlog.Entry {
	w.t.Helper()
	resp, err := http.Get(w.ctl + "/v1/log" + f)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Entries []decisionlog.Entry }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		w.t.Fatal(err)
	}
	return body.Entries
}

func (w *world) lastFor(host string) decisionlog.Entry { return w.find(host, "") }

// find waits for a decision about host (made with method, when given) and returns the newest.
// Tunnels are recorded when they close, a moment after the client is done.
func (w *world) find(host, method string) decisionlog.Entry {
	w.t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		es := w.log("")
		for i := len(es) - 1; i >= 0; i-- {
			if es[i].Host == host && es[i].Via != "dns" && (method == "" || es[i].Method == method) {
				return es[i]
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.t.Fatalf("no decision recorded for %s %s", method, host)
	return decisionlog.Entry{}
}

func need(t *testing.T, tools ...string) {
	t.Helper()
	testreq.Tools(t, tools...)
}

func TestCurlThroughTheExplicitProxy(t *testing.T) {
	need(t, "curl")
	w := newWorld(t, nil)
	proxy := "http://" + w.client.Peer.String() + ":3128"

	out, err := w.run(nil, "curl", "-sS", "-x", proxy, "http://api.allowed.test/hello")
	if err != nil || !strings.Contains(out, `"server":"up:80"`) || !strings.Contains(out, `"path":"/hello"`) {
		t.Fatalf("allowed http: %v %s", err, out)
	}
	if e := w.lastFor("api.allowed.test"); !e.Allowed || e.Via != "proxy" || e.Status != 200 || e.Path != "/hello" || e.BytesIn == 0 || e.Rule != "egress.rules[0]: api.allowed.test" {
		t.Errorf("log = %+v", e)
	}
	// https through CONNECT, with the certificate checked end to end (no TLS termination).
	out, err = w.run([]string{"https_proxy=" + proxy}, "curl", "-sS", "--cacert", w.ca.PEMPath, "https://api.allowed.test/secure")
	if err != nil || !strings.Contains(out, `"server":"up:443"`) || !strings.Contains(out, `"tls":true`) {
		t.Fatalf("allowed https: %v %s", err, out)
	}
	if e := w.find("api.allowed.test", "CONNECT"); !e.Allowed || e.BytesIn == 0 || e.BytesOut == 0 {
		t.Errorf("CONNECT log = %+v", e)
	}
	// A host with no rule is refused, over http and CONNECT.
	out, _ = w.run(nil, "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-x", proxy, "http://blocked.test/")
	if out != "403" {
		t.Errorf("blocked http: %s", out)
	}
	out, err = w.run(nil, "curl", "-sS", "--cacert", w.ca.PEMPath, "-x", proxy, "https://blocked.test/")
	if err == nil || !strings.Contains(out, "403") {
		t.Errorf("blocked CONNECT: %v %s", err, out)
	}
	if e := w.lastFor("blocked.test"); e.Allowed || e.Rule != "egress.default" || e.Client != w.client.Addr.String() {
		t.Errorf("blocked log = %+v (want client %s: the address that asked)", e, w.client.Addr)
	}
	// Port rules: *.allowed.test allows 443, not 8443.
	out, _ = w.run(nil, "curl", "-sS", "--cacert", w.ca.PEMPath, "-x", proxy, "https://other.allowed.test:8443/")
	if !strings.Contains(out, "403") {
		t.Errorf("port not allowed: %s", out)
	}
}

func TestGoClientWithProxy(t *testing.T) {
	w := newWorld(t, nil)
	pu, _ := url.Parse("http://" + w.client.Peer.String() + ":3128")
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: w.ca.Pool}}}
	resp, err := c.Post("http://api.allowed.test/upload", "text/plain", strings.NewReader(strings.Repeat("x", 5000)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"body":5000`) {
		t.Fatalf("POST: %s", b)
	}
	if e := w.lastFor("api.allowed.test"); e.BytesOut != 5000 || e.Method != "POST" {
		t.Errorf("log = %+v", e)
	}
	resp, err = c.Get("https://tls.allowed.test:443/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.TLS == nil {
		t.Fatalf("https: %d", resp.StatusCode)
	}
	// An origin-form request to the proxy port is a clear error, not a hang.
	raw, err := net.Dial("tcp", w.client.Peer.String()+":3128")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	fmt.Fprintf(raw, "GET /x HTTP/1.1\r\nHost: api.allowed.test\r\n\r\n")
	_ = raw.SetReadDeadline(time.Now().Add(3 * time.Second))
	line, _ := io.ReadAll(io.LimitReader(raw, 12))
	if string(line) != "HTTP/1.1 400" {
		t.Errorf("origin-form to the proxy: %q", line)
	}
}

// TestNodeFetchIgnoresProxyAndIsStillDecided: Node's fetch does not use proxy variables, so it
// resolves through the sidecar's DNS, connects to the sidecar's transparent ports, and is
// decided by Host header and SNI.
func TestNodeFetchIgnoresProxyAndIsStillDecided(t *testing.T) {
	need(t, "node")
	w := newWorld(t, nil)
	fetch := func(u string) (string, error) {
		js := fmt.Sprintf(`fetch(%q).then(async r => console.log(r.status, await r.text())).catch(e => { console.log("ERR", e.cause ? e.cause.code || e.cause.message : e.message); process.exit(3) })`, u)
		return w.run([]string{"NODE_EXTRA_CA_CERTS=" + w.ca.PEMPath, "HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9"}, "node", "-e", js)
	}
	out, err := fetch("http://api.allowed.test/node")
	if err != nil || !strings.HasPrefix(out, "200 ") || !strings.Contains(out, `"server":"up:80"`) {
		t.Fatalf("node http allowed: %v %s", err, out)
	}
	if e := w.lastFor("api.allowed.test"); e.Via != "transparent" || !e.Allowed {
		t.Errorf("log = %+v", e)
	}
	out, err = fetch("https://tls.allowed.test/node")
	if err != nil || !strings.HasPrefix(out, "200 ") || !strings.Contains(out, `"server":"up:443"`) {
		t.Fatalf("node https allowed: %v %s", err, out)
	}
	if e := w.find("tls.allowed.test", "TLS"); e.Via != "transparent" || !e.Allowed || e.BytesIn == 0 {
		t.Errorf("TLS log = %+v", e)
	}
	out, _ = fetch("http://blocked.test/")
	if !strings.HasPrefix(out, "403 ") {
		t.Errorf("node http blocked: %s", out)
	}
	out, err = fetch("https://blocked.test/")
	if err == nil || !strings.Contains(out, "ERR") {
		t.Errorf("node https blocked: %v %s", err, out)
	}
	if e := w.find("blocked.test", "TLS"); e.Allowed || e.Via != "transparent" || e.Client != w.client.Addr.String() {
		t.Errorf("blocked TLS log = %+v", e)
	}
}

func TestGuardRefusesPrivateAndLinkLocalResolutions(t *testing.T) {
	need(t, "curl")
	w := newWorld(t, nil)
	proxy := "http://" + w.client.Peer.String() + ":3128"
	for _, host := range []string{"loop.allowed.test", "meta.allowed.test", "rebind.allowed.test"} {
		out, _ := w.run(nil, "curl", "-sS", "-w", " %{http_code}", "-x", proxy, "http://"+host+"/")
		if !strings.HasSuffix(out, " 403") || !strings.Contains(out, "guard") {
			t.Errorf("%s: %s", host, out)
		}
		e := w.lastFor(host)
		if e.Allowed || !strings.HasPrefix(e.Reason, "guard: ") || e.Mode != "allow" {
			t.Errorf("%s log = %+v", host, e)
		}
	}
	// An address in the cluster's range, asked for directly, is refused by policy first.
	out, _ := w.run(nil, "curl", "-sS", "-w", " %{http_code}", "-x", proxy, "http://198.18.255.7/")
	if !strings.HasSuffix(out, " 403") {
		t.Errorf("cluster address: %s", out)
	}
	// The sidecar never connects to itself.
	out, _ = w.run(nil, "curl", "-sS", "-w", " %{http_code}", "-H", "Host: "+w.client.Peer.String(), "http://"+w.client.Peer.String()+"/")
	if !strings.HasSuffix(out, " 403") {
		t.Errorf("self: %s", out)
	}
}

func TestCaptureOverHTTPAndSMTP(t *testing.T) {
	need(t, "curl")
	w := newWorld(t, nil)
	out, err := w.run(nil, "curl", "-sS", "-X", "POST", "-H", "Authorization: Bearer sk_live_secret", "-H", "X-Event: order.paid", "--data", `{"order":42}`, "http://hooks.capture.test/webhook?x=1")
	if err != nil || !strings.Contains(out, `"af":"captured"`) {
		t.Fatalf("capture: %v %s", err, out)
	}
	resp, err := http.Get(w.ctl + "/v1/inbox?kind=http&host=hooks.capture.test")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Messages []inbox.Message }
	_ = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if len(list.Messages) != 1 {
		t.Fatalf("inbox = %+v", list)
	}
	m := list.Messages[0]
	if m.Method != "POST" || m.Path != "/webhook?x=1" || m.Body != `{"order":42}` || m.Header["Authorization"][0] != "[redacted]" || m.Header["X-Event"][0] != "order.paid" {
		t.Errorf("captured = %+v", m)
	}
	if e := w.lastFor("hooks.capture.test"); e.Mode != "capture" || e.Allowed || e.Status != 200 {
		t.Errorf("log = %+v", e)
	}
	// Mail: the app sends to its provider's host name; DNS points it at the sidecar.
	mail := "From: shop@app.test\r\nTo: alice@example.test\r\nSubject: Receipt 42\r\n\r\nThanks!\r\n"
	done := make(chan string, 1)
	go func() {
		r, err := http.Get(w.ctl + "/v1/inbox/wait?to=alice@&subject=receipt&timeout=15s")
		if err != nil {
			done <- err.Error()
			return
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		done <- fmt.Sprintf("%d %s", r.StatusCode, b)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := w.client.Command(ctx, "curl", "-sS", "smtp://smtp.mailprovider.test:587", "--mail-from", "shop@app.test", "--mail-rcpt", "alice@example.test", "-T", "-")
	cmd.Stdin = strings.NewReader(mail)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("curl smtp: %v %s", err, out)
	}
	got := <-done
	if !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"subject": "Receipt 42"`) || !strings.Contains(got, `"client": "`+w.client.Addr.String()+`"`) {
		t.Errorf("wait: %s (want the sender's address %s as client)", got, w.client.Addr)
	}
	if e := w.find("example.test", "MAIL"); e.Client != w.client.Addr.String() || e.Mode != "capture" {
		t.Errorf("mail log = %+v", e)
	}
	// STARTTLS is refused cleanly: curl --ssl-reqd fails with a clear error, nothing hangs.
	cmd = w.client.Command(ctx, "curl", "-sS", "--ssl-reqd", "smtp://smtp.mailprovider.test:25", "--mail-from", "a@b.test", "--mail-rcpt", "c@d.test", "-T", "-")
	cmd.Stdin = strings.NewReader(mail)
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("STARTTLS required but mail went through: %s", out)
	}
	// Waiting for what never comes ends with 504.
	r, err := http.Get(w.ctl + "/v1/inbox/wait?to=nobody&timeout=100ms")
	if err != nil || r.StatusCode != http.StatusGatewayTimeout {
		t.Errorf("wait timeout: %v %v", r, err)
	}
	r.Body.Close()
	// A TLS tunnel to a captured host is refused, not silently let through.
	out, _ = w.run(nil, "curl", "-sS", "-x", "http://"+w.client.Peer.String()+":3128", "https://hooks.capture.test/")
	if !strings.Contains(out, "403") {
		t.Errorf("CONNECT to captured host: %s", out)
	}
}

func TestLogEndpointAndStream(t *testing.T) {
	need(t, "curl")
	w := newWorld(t, nil)
	proxy := "http://" + w.client.Peer.String() + ":3128"
	_, _ = w.run(nil, "curl", "-sS", "-x", proxy, "http://api.allowed.test/")
	_, _ = w.run(nil, "curl", "-sS", "-x", proxy, "http://blocked.test/")
	w.lastFor("blocked.test")
	blocked := w.log("?blocked=true")
	for _, e := range blocked {
		if e.Allowed {
			t.Errorf("blocked filter returned %+v", e)
		}
	}
	if len(blocked) == 0 {
		t.Fatal("no blocked entries")
	}
	if l := w.log("?limit=1"); len(l) != 1 {
		t.Errorf("limit=1: %d", len(l))
	}
	if l := w.log("?since=" + time.Now().Add(time.Hour).UTC().Format(time.RFC3339)); len(l) != 0 {
		t.Errorf("since future: %d", len(l))
	}
	for _, bad := range []string{"?limit=x", "?blocked=maybe", "?since=yesterday"} {
		r, err := http.Get(w.ctl + "/v1/log" + bad)
		if err != nil || r.StatusCode != 400 {
			t.Errorf("%s: %v %v", bad, r.StatusCode, err)
		}
		r.Body.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.sc.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(w.out.String()), "\n")
	var sawBlocked bool
	for _, l := range lines {
		var e decisionlog.Entry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("stdout line %q: %v", l, err)
		}
		if e.Environment != "t-pr-1" {
			t.Errorf("line without environment: %s", l)
		}
		sawBlocked = sawBlocked || (e.Host == "blocked.test" && !e.Allowed)
	}
	if !sawBlocked {
		t.Errorf("stdout lacks the blocked decision:\n%s", w.out.String())
	}
}

func TestRobustness(t *testing.T) {
	w := newWorld(t, func(c *config.Config) {
		c.Limits.MaxConns = 3
		c.Limits.HandshakeTimeout = "500ms"
		c.Limits.MaxHeaderBytes = 4096
	})
	peer := w.client.Peer.String()
	// The connection limit: with 3 held, the 4th is closed at once.
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", peer+":25")
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 64)); err != nil { // the greeting: the session is held
			t.Fatal(err)
		}
		held = append(held, c)
	}
	extra, err := net.Dial("tcp", peer+":25")
	if err == nil {
		_ = extra.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, rerr := extra.Read(make([]byte, 64))
		if rerr == nil {
			t.Errorf("4th connection served (%d bytes)", n)
		}
		extra.Close()
	}
	if w.sc.Rejected() < 1 {
		t.Errorf("rejected = %d", w.sc.Rejected())
	}
	for _, c := range held {
		c.Close()
	}
	for deadline := time.Now().Add(3 * time.Second); w.sc.Active() > 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := w.sc.Active(); n != 0 {
		t.Fatalf("%d connections still held after the clients closed", n)
	}
	// Oversized headers: 431, not a crash or a hang.
	raw, err := net.Dial("tcp", peer+":3128")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(raw, "GET http://api.allowed.test/ HTTP/1.1\r\nHost: api.allowed.test\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 64<<10))
	_ = raw.SetReadDeadline(time.Now().Add(3 * time.Second))
	status, _ := io.ReadAll(io.LimitReader(raw, 12))
	raw.Close()
	if string(status) != "HTTP/1.1 431" {
		t.Errorf("big header: %q", status)
	}
	// A TLS client that never says hello is cut off after the handshake timeout.
	silent, err := net.Dial("tcp", peer+":443")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = silent.Read(make([]byte, 1))
	silent.Close()
	if err == nil || time.Since(start) > 4*time.Second {
		t.Errorf("silent TLS client: %v after %v", err, time.Since(start))
	}
}

func TestConfigRefusedAtStart(t *testing.T) {
	_, err := config.Config{Environment: "e", Namespace: "n", ClusterResolver: "x", AdvertiseIPv4: "nope",
		Egress: manifest.Egress{Rules: []manifest.EgressRule{{Host: "*"}}},
		Listen: config.Listen{Proxy: ":3128", HTTP: ":3128", Control: ":3128"},
		Limits: config.Limits{IdleTimeout: "forever"},
	}.Resolve()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"cluster_resolver", "advertise_ipv4", "egress.rules[0].host", "listen.http: port 3128 is also listen.proxy", "listen.control", "limits.idle_timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	_ = netip.Addr{}
}
