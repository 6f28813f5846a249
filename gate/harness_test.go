package gate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/antifailure/af/internal/afbuild"
	"github.com/antifailure/af/internal/testnet"
)

// The harness: a "pod" namespace whose only way anywhere is a router, and behind the router a
// sidecar host, a fake internet (a TCP listener on a documentation address and a UDP DNS
// responder), a fake metadata server on a link-local address that is not the real one, and a
// fake API server. nftables rules in the pod namespace play the CNI.

type harness struct {
	t       testing.TB
	r       *testnet.Router
	sidecar string
	args    []string
}

const (
	publicIP   = "198.51.100.10"
	resolverIP = "198.51.100.53"
	metadataIP = "169.254.77.1" // link-local, deliberately not the real metadata address
)

func newHarness(t testing.TB) *harness {
	t.Helper()
	n := testnet.New(t)
	r := n.Router("gw")
	sc := r.Attach("sc")
	inet := r.Attach("inet")
	meta := r.Attach("meta")
	api := r.Attach("api")
	inet.AddAddr(publicIP + "/32")
	inet.AddAddr(resolverIP + "/32")
	r.Route("198.51.100.0/24", inet)
	meta.AddAddr(metadataIP + "/32")
	r.Route(metadataIP+"/32", meta)

	accept := acceptAndClose
	accept(sc.Listen(":3128"))
	accept(inet.Listen(publicIP + ":443"))
	accept(api.Listen(":6443"))
	serveDNS(inet.ListenPacket(resolverIP + ":53"))
	// A neighbour on the pods' segment, as another environment's pod and the cluster resolver
	// are on a bridge CNI: a resolver and a service on every address of both families.
	nb := r.Attach("nb")
	serveDNS(nb.ListenPacketNetwork("udp", ":53"))
	accept(nb.ListenNetwork("tcp", ":8080"))
	// The node: the router, serving a port in the NodePort range over TCP and UDP.
	accept(r.Listen(":" + nodePort))
	echoUDP(r.ListenPacket(":" + nodePort))
	go func() {
		_ = http.Serve(meta.Listen(metadataIP+":80"), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("fake-metadata\n"))
		}))
	}()
	h := &harness{t: t, r: r, sidecar: sc.Addr.String() + ":3128"}
	h.args = []string{
		"--public-tcp", publicIP + ":443", "--public-dns", resolverIP + ":53",
		"--metadata", metadataIP + ":80", "--apiserver", api.Addr.String() + ":6443",
		"--node", r.Addr.String(), "--node-ports", nodePort + "/tcp," + nodePort + "/udp",
		"--sidecar", h.sidecar, "--ipv6", "off", "--timeout", "300ms", "--interval", "50ms",
	}
	return h
}

// acceptAndClose accepts every connection on ln and closes it at once, until ln is closed.
func acceptAndClose(ln net.Listener) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

// nodePort is the node's port in the NodePort range (30000-32767) in the harness.
const nodePort = "30999"

// serveDNS answers every query on pc: whatever the answer says, it is an answer.
func serveDNS(pc net.PacketConn) {
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if n >= 12 {
				buf[2] |= 0x80
				_, _ = pc.WriteTo(buf[:n], from)
			}
		}
	}()
}

// echoUDP sends every datagram back.
func echoUDP(pc net.PacketConn) {
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:n], from)
		}
	}()
}

// CNI behaviours, as nftables rules in the pod's namespace.
const (
	enforceDrop = "drop"
	enforceRej  = "reject"
	udpHole     = "udp-hole"
	cutOff      = "cut-off"
	// ipv4Only is an enforcer that programs IPv4 alone, as kube-router does when it is not
	// run dual-stack: IPv6 is untouched.
	ipv4Only = "ipv4-only"
	// ipv4OnlyNoEcho is the same with ICMPv6 echo dropped: the DNS query to ff02::1 must
	// still find the resolver.
	ipv4OnlyNoEcho = "ipv4-only-no-echo"
	// nodePortHole denies everything but lets the pod reach the node's NodePort range, as
	// kube-router's exemption for local NodePorts does.
	nodePortHole = "nodeport-hole"
	// nodePortHoleICMP is the same with the rest rejected by ICMP port unreachable, as
	// kube-router rejects.
	nodePortHoleICMP = "nodeport-hole-icmp"
	// enforceRejICMP rejects everything with ICMP port unreachable, TCP included.
	enforceRejICMP = "reject-icmp"
)

func (h *harness) enforce(pod *testnet.Host, mode string) {
	h.t.Helper()
	sc, _, _ := net.SplitHostPort(h.sidecar)
	var rules string
	switch mode {
	case enforceDrop:
		rules = fmt.Sprintf("ip daddr %s tcp dport 3128 accept\n\t\tdrop", sc)
	case enforceRej:
		rules = fmt.Sprintf("ip daddr %s tcp dport 3128 accept\n\t\tmeta l4proto tcp reject with tcp reset\n\t\treject", sc)
	case udpHole:
		rules = fmt.Sprintf("ip daddr %s tcp dport 3128 accept\n\t\tmeta l4proto udp accept\n\t\tdrop", sc)
	case cutOff:
		rules = "drop"
	case ipv4Only:
		rules = fmt.Sprintf("meta nfproto ipv6 accept\n\t\tip daddr %s tcp dport 3128 accept\n\t\tdrop", sc)
	case ipv4OnlyNoEcho:
		rules = fmt.Sprintf("icmpv6 type echo-request drop\n\t\tmeta nfproto ipv6 accept\n\t\tip daddr %s tcp dport 3128 accept\n\t\tdrop", sc)
	case nodePortHole:
		rules = fmt.Sprintf("ip daddr %s tcp dport 3128 accept\n\t\tip daddr %s meta l4proto { tcp, udp } th dport 30000-32767 accept\n\t\tdrop", sc, h.r.Addr)
	case nodePortHoleICMP:
		rules = fmt.Sprintf("ip daddr %s tcp dport 3128 accept\n\t\tip daddr %s meta l4proto { tcp, udp } th dport 30000-32767 accept\n\t\treject", sc, h.r.Addr)
	case enforceRejICMP:
		rules = fmt.Sprintf("ip daddr %s tcp dport 3128 accept\n\t\treject", sc)
	}
	pod.Nft(fmt.Sprintf(`table inet cni {
	chain out {
		type filter hook output priority 0; policy accept;
		oif "lo" accept
		%s
	}
}`, rules))
}

type gateRun struct {
	code    int
	res     Result
	out     string
	elapsed time.Duration
}

func (h *harness) gate(pod *testnet.Host, extra ...string) gateRun {
	h.t.Helper()
	bin := afbuild.Binary(h.t) // the real af binary: the gate runs as it would in a pod
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	cmd := pod.Command(ctx, bin, append(append([]string{"gate"}, h.args...), extra...)...)
	out, err := cmd.CombinedOutput()
	run := gateRun{out: string(out), elapsed: time.Since(start)}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		run.code = ee.ExitCode()
	} else if err != nil {
		h.t.Fatalf("gate: %v", err)
	}
	res, ok := ParseVerdict(run.out)
	if !ok {
		h.t.Fatalf("no verdict line in:\n%s", run.out)
	}
	run.res = res
	return run
}

func attemptOf(as []Attempt, route string) Attempt {
	for _, a := range as {
		if a.Route == route {
			return a
		}
	}
	return Attempt{}
}

func routesWith(as []Attempt, o Outcome) []string {
	var out []string
	for _, a := range as {
		if a.Outcome == o {
			out = append(out, a.Route)
		}
	}
	return out
}

// routeSet is the distinct route names, sorted as they are tried.
func routeSet(names []string) string {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return strings.Join(out, ",")
}

func TestGateScenarios(t *testing.T) {
	h := newHarness(t)
	all := []string{RouteTCP, RouteDNS, RouteMetadata, RouteAPIServer, RouteLinkLocal, RouteNode, RouteNodeUnannounced}
	// open is every route a pod with no policy gets out by: the node's unannounced route
	// cannot tell (a reset everywhere), the node route's named ports can.
	open := all[:len(all)-1]

	t.Run("enforcing by dropping", func(t *testing.T) {
		pod := h.r.Attach("pod1")
		h.enforce(pod, enforceDrop)
		g := h.gate(pod, "--deadline", "10s")
		if g.code != 0 || g.res.Verdict != Contained || routeSet(routesWith(g.res.Routes, Denied)) != strings.Join(all, ",") || len(g.res.Routes) != 8 {
			t.Fatalf("exit %d\n%s", g.code, g.out)
		}
	})
	t.Run("enforcing by rejecting with ICMP", func(t *testing.T) {
		pod := h.r.Attach("pod2i")
		h.enforce(pod, enforceRejICMP)
		g := h.gate(pod, "--deadline", "10s")
		u := attemptOf(g.res.Routes, RouteNodeUnannounced)
		if g.code != 0 || g.res.Verdict != Contained || !strings.Contains(u.Detail, "no difference") {
			t.Fatalf("exit %d, node-unannounced %+v\n%s", g.code, u, g.out)
		}
		t.Logf("node-unannounced: %+v", u)
	})
	t.Run("enforcing by rejecting", func(t *testing.T) {
		pod := h.r.Attach("pod2")
		h.enforce(pod, enforceRej)
		g := h.gate(pod, "--deadline", "10s")
		if g.code != 0 || g.res.Verdict != Contained {
			t.Fatalf("exit %d\n%s", g.code, g.out)
		}
		if !strings.Contains(g.out, `detail="connection refused"`) {
			t.Errorf("rejections not seen as refusals:\n%s", g.out)
		}
		// A reset on every port, the node's own or the enforcer's: a uniform rejection is not
		// an exemption.
		if u := attemptOf(g.res.Routes, RouteNodeUnannounced); u.Outcome != Denied || !strings.Contains(u.Detail, "a reset everywhere") {
			t.Errorf("node-unannounced %+v", u)
		}
	})
	t.Run("not enforcing", func(t *testing.T) {
		pod := h.r.Attach("pod3")
		g := h.gate(pod, "--deadline", "5s")
		if g.code != 3 || g.res.Verdict != Escape || routeSet(routesWith(g.res.Routes, Escaped)) != strings.Join(open, ",") {
			t.Fatalf("exit %d, escaped %v\n%s", g.code, routesWith(g.res.Routes, Escaped), g.out)
		}
		for _, r := range open {
			if !strings.Contains(g.out, r) {
				t.Errorf("the error does not name %s", r)
			}
		}
		if !strings.Contains(g.out, "AF-RUN-043") {
			t.Errorf("no AF-RUN-043 in:\n%s", g.out)
		}
	})
	t.Run("UDP-only hole", func(t *testing.T) {
		pod := h.r.Attach("pod4")
		h.enforce(pod, udpHole)
		g := h.gate(pod, "--deadline", "3s")
		// The node's UDP port answers through the same hole.
		if g.code != 3 || routeSet(routesWith(g.res.Routes, Escaped)) != RouteDNS+","+RouteNode {
			t.Fatalf("exit %d, escaped %v\n%s", g.code, routesWith(g.res.Routes, Escaped), g.out)
		}
	})
	t.Run("IPv4-only enforcement: the segment answers over IPv6 link-local", func(t *testing.T) {
		pod := h.r.Attach("pod6")
		h.enforce(pod, ipv4Only)
		g := h.gate(pod, "--deadline", "5s")
		if g.code != 3 || routeSet(routesWith(g.res.Routes, Escaped)) != RouteLinkLocal {
			t.Fatalf("exit %d, escaped %v\n%s", g.code, routesWith(g.res.Routes, Escaped), g.out)
		}
		if !strings.Contains(g.out, "AF-RUN-043") || !strings.Contains(g.out, RouteLinkLocal) {
			t.Errorf("the error does not name the route:\n%s", g.out)
		}
		t.Logf("link-local: %+v", attemptOf(g.res.Routes, RouteLinkLocal))
	})
	t.Run("IPv4-only enforcement without echo: the resolver answers the all-nodes DNS query", func(t *testing.T) {
		pod := h.r.Attach("pod7")
		h.enforce(pod, ipv4OnlyNoEcho)
		g := h.gate(pod, "--deadline", "5s")
		ll := attemptOf(g.res.Routes, RouteLinkLocal)
		if g.code != 3 || ll.Outcome != Escaped || !strings.Contains(ll.Detail, "DNS query to ff02::1") && !strings.Contains(ll.Detail, "on TCP") {
			t.Fatalf("exit %d, link-local %+v\n%s", g.code, ll, g.out)
		}
		t.Logf("link-local: %+v", ll)
	})
	t.Run("IPv4-only enforcement with IPv6 disabled in the pod", func(t *testing.T) {
		pod := h.r.Attach("pod8")
		h.enforce(pod, ipv4Only)
		if out, err := pod.Command(context.Background(), "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1").CombinedOutput(); err != nil {
			t.Fatalf("sysctl: %v: %s", err, out)
		}
		g := h.gate(pod, "--deadline", "10s")
		ll := attemptOf(g.res.Routes, RouteLinkLocal)
		if g.code != 0 || ll.Outcome != Denied || !strings.Contains(ll.Detail, "IPv6 disabled on") {
			t.Fatalf("exit %d, link-local %+v\n%s", g.code, ll, g.out)
		}
		t.Logf("link-local: %+v", ll)
	})
	t.Run("the NodePort range exempted: the node answers", func(t *testing.T) {
		pod := h.r.Attach("pod9")
		h.enforce(pod, nodePortHole)
		g := h.gate(pod, "--deadline", "3s")
		if g.code != 3 || routeSet(routesWith(g.res.Routes, Escaped)) != RouteNode+","+RouteNodeUnannounced {
			t.Fatalf("exit %d, escaped %v\n%s", g.code, routesWith(g.res.Routes, Escaped), g.out)
		}
		if len(g.res.Escaped) != 3 {
			t.Errorf("want the node's TCP and UDP port and the range escaped, got %+v", g.res.Escaped)
		}
	})
	// The listener in the range is not named: the node route tries the kubelet's port only,
	// where nothing answers; the range's exemption gives it away.
	for i, mode := range []string{nodePortHole, nodePortHoleICMP} {
		t.Run("the NodePort range exempted, its listener not named: "+mode, func(t *testing.T) {
			pod := h.r.Attach(fmt.Sprintf("pod1%d", i))
			h.enforce(pod, mode)
			g := h.gate(pod, "--deadline", "3s", "--node-ports", "10250/tcp")
			if g.code != 3 || routeSet(routesWith(g.res.Routes, Escaped)) != RouteNodeUnannounced {
				t.Fatalf("exit %d, escaped %v\n%s", g.code, routesWith(g.res.Routes, Escaped), g.out)
			}
			u := attemptOf(g.res.Routes, RouteNodeUnannounced)
			if !strings.Contains(u.Detail, "the node's own reset") || !strings.Contains(g.out, "AF-RUN-043") || !strings.Contains(g.out, RouteNodeUnannounced) {
				t.Errorf("node-unannounced %+v\n%s", u, g.out)
			}
			t.Logf("node-unannounced: %+v", u)
		})
	}
	t.Run("sidecar unreachable", func(t *testing.T) {
		pod := h.r.Attach("pod5")
		h.enforce(pod, cutOff)
		g := h.gate(pod, "--deadline", "3s")
		if g.code != 4 || g.res.Verdict != CannotAnswer || !strings.Contains(g.res.Reason, "sidecar") {
			t.Fatalf("exit %d reason %q\n%s", g.code, g.res.Reason, g.out)
		}
	})
}

// TestLateEnforcement is the startup window: the CNI programs a new pod's rules some time
// after the pod exists. A probe in an older pod passes; a single check in the new pod at the
// moment it starts sees routes open (its application would have got out); the gate waits,
// observes the escapes, and lets the application start only once every route is denied.
func TestLateEnforcement(t *testing.T) {
	h := newHarness(t)
	const late = 1500 * time.Millisecond

	old := h.r.Attach("old")
	h.enforce(old, enforceDrop)
	probe := h.gate(old, "--rounds", "1", "--deadline", "5s")
	if probe.code != 0 {
		t.Fatalf("the probe in an enforced pod: exit %d\n%s", probe.code, probe.out)
	}

	single := h.r.Attach("new1")
	once := h.gate(single, "--rounds", "1", "--deadline", "400ms")
	if once.code != 3 || len(routesWith(once.res.Routes, Escaped)) < 4 {
		t.Fatalf("single check at start: exit %d\n%s", once.code, once.out)
	}

	pod := h.r.Attach("new2")
	go func() {
		time.Sleep(late)
		h.enforce(pod, enforceDrop)
	}()
	g := h.gate(pod, "--deadline", "20s")
	if g.code != 0 || g.res.Verdict != Contained {
		t.Fatalf("gate: exit %d\n%s", g.code, g.out)
	}
	if len(g.res.Escaped) < 4 {
		t.Errorf("the gate did not see the window open: escaped %v", g.res.Escaped)
	}
	if g.elapsed < late {
		t.Errorf("the gate passed after %v, before enforcement at %v", g.elapsed, late)
	}
	// What the application would do first, right after the gate: nothing gets out.
	after := h.gate(pod, "--rounds", "1", "--deadline", "2s")
	if after.code != 0 {
		t.Errorf("right after the gate: exit %d\n%s", after.code, after.out)
	}
	t.Logf("probe in an enforced pod: contained; single check in a new pod at start: %d routes escaped; gate in a new pod: passed after %v having seen %d routes escape, %d rounds",
		len(routesWith(once.res.Routes, Escaped)), g.elapsed.Round(time.Millisecond), len(g.res.Escaped), g.res.Rounds)
}

// BenchmarkRoutes measures one contained verdict (3 all-denied rounds, 1 s attempts) in a pod
// of the harness, where the CNI drops and where it rejects, with IPv6 on in the pod and off (as
// on the hardened test cluster). With AF_GATE_BENCH_BASELINE naming another af binary (one
// built before the link-local and node routes existed) it runs that too, with the targets it
// knows, so the cost of the new routes is read off one run:
//
//	AF_GATE_BENCH_BASELINE=/tmp/af-old go test -run '^$' -bench Routes -benchtime 3x ./gate
func BenchmarkRoutes(b *testing.B) {
	h := newHarness(b)
	base := []string{"--rounds", "3", "--timeout", "1s", "--interval", "200ms", "--deadline", "30s"}
	bins := map[string]string{"this": afbuild.Binary(b)}
	if old := os.Getenv("AF_GATE_BENCH_BASELINE"); old != "" {
		bins["baseline"] = old
	}
	for i, c := range []struct {
		name, mode string
		noIPv6     bool
	}{
		{"drop", enforceDrop, false},
		{"reject", enforceRej, false},
		{"drop-ipv6-off", enforceDrop, true},
		{"reject-ipv6-off", enforceRej, true},
	} {
		pod := h.r.Attach(fmt.Sprintf("bench%d", i))
		h.enforce(pod, c.mode)
		if c.noIPv6 {
			if out, err := pod.Command(context.Background(), "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1").CombinedOutput(); err != nil {
				b.Fatalf("sysctl: %v: %s", err, out)
			}
		}
		time.Sleep(2 * time.Second) // the link-local address leaves its tentative state
		for _, which := range []string{"baseline", "this"} {
			bin, ok := bins[which]
			if !ok {
				continue
			}
			b.Run(c.name+"/"+which, func(b *testing.B) {
				args := append([]string{"gate"}, h.args...)
				if which == "baseline" {
					args = withoutFlags(args, "--node", "--node-ports")
				}
				args = append(args, base...)
				for b.Loop() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					out, err := pod.Command(ctx, bin, args...).CombinedOutput()
					cancel()
					res, found := ParseVerdict(string(out))
					if err != nil || !found || res.Verdict != Contained {
						b.Fatalf("%s: %v\n%s", which, err, out)
					}
					b.ReportMetric(res.MS, "verdict-ms")
					b.ReportMetric(float64(len(res.Routes)), "routes")
				}
			})
		}
	}
}

// withoutFlags drops each named flag and its value.
func withoutFlags(args []string, names ...string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if slices.Contains(names, args[i]) {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// TestWatch: `af probe --watch` goes on after a contained verdict and prints one verdict line
// per check, with its time, whatever the verdict: contained while the pod is enforced, escaped
// once enforcement is gone (naming the routes), contained again once it is back. Stopped as the
// kubelet stops a container (SIGTERM), it exits 0.
func TestWatch(t *testing.T) {
	h := newHarness(t)
	pod := h.r.Attach("watched")
	h.enforce(pod, enforceDrop)
	bin := afbuild.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := pod.Command(ctx, bin, append(append([]string{"probe"}, h.args...), "--rounds", "1", "--deadline", "5s", "--watch", "300ms")...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan Result, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if res, ok := ParseVerdict(sc.Text()); ok && strings.Contains(sc.Text(), VerdictMarker) {
				lines <- res
			}
		}
		close(lines)
	}()
	checks := 0
	// next reads verdict lines until one says want from a check that ended after since.
	next := func(want string, since time.Time) Result {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case res, ok := <-lines:
				if !ok {
					t.Fatalf("the watch ended after %d checks waiting for %s; stderr:\n%s", checks, want, stderr.String())
				}
				checks++
				if res.At.IsZero() {
					t.Fatalf("a verdict line without its time: %+v", res)
				}
				if res.Verdict == want && res.At.After(since) {
					return res
				}
			case <-timeout:
				t.Fatalf("no %s check after %s in 30 s (%d checks read)", want, since.Format(time.StampMilli), checks)
			}
		}
	}
	first := next(Contained, time.Time{})
	second := next(Contained, first.At)
	opened := time.Now()
	pod.Nft("delete table inet cni")
	esc := next(Escape, opened)
	if a := attemptOf(esc.Routes, "tcp-public"); a.Outcome != Escaped {
		t.Errorf("enforcement gone, but tcp-public was %s: %+v", a.Outcome, esc.Routes)
	}
	closed := time.Now()
	h.enforce(pod, enforceDrop)
	again := next(Contained, closed)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("stopped by SIGTERM: %v; stderr:\n%s", err, stderr.String())
	}
	t.Logf("%d checks: contained at %s and %s; enforcement removed, escaped %s later by %d routes; enforced again, contained %s later",
		checks, first.At.Format(time.StampMilli), second.At.Format(time.StampMilli),
		esc.At.Sub(opened).Round(time.Millisecond), len(routesWith(esc.Routes, Escaped)), again.At.Sub(closed).Round(time.Millisecond))
}
