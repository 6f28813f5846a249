package gate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/antifailure/af/internal/testnet"
)

// The harness: a "pod" namespace whose only way anywhere is a router, and behind the router a
// sidecar host, a fake internet (a TCP listener on a documentation address and a UDP DNS
// responder), a fake metadata server on a link-local address that is not the real one, and a
// fake API server. nftables rules in the pod namespace play the CNI.

var (
	afBinOnce sync.Once
	afBin     string
	afBinErr  error
)

// buildAF builds the real af binary once; the gate runs as it would in a pod.
func buildAF(t *testing.T) string {
	t.Helper()
	afBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "af-gate-test")
		if err != nil {
			afBinErr = err
			return
		}
		afBin = filepath.Join(dir, "af")
		cmd := exec.Command("go", "build", "-o", afBin, "../cmd/af")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			afBinErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if afBinErr != nil {
		t.Fatal(afBinErr)
	}
	return afBin
}

type harness struct {
	t       *testing.T
	r       *testnet.Router
	sidecar string
	args    []string
}

const (
	publicIP   = "198.51.100.10"
	resolverIP = "198.51.100.53"
	metadataIP = "169.254.77.1" // link-local, deliberately not the real metadata address
)

func newHarness(t *testing.T) *harness {
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

	accept := func(ln net.Listener) {
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
	accept(sc.Listen(":3128"))
	accept(inet.Listen(publicIP + ":443"))
	accept(api.Listen(":6443"))
	dns := inet.ListenPacket(resolverIP + ":53")
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := dns.ReadFrom(buf)
			if err != nil {
				return
			}
			if n >= 12 {
				buf[2] |= 0x80 // a response: whatever it says, it is an answer
				_, _ = dns.WriteTo(buf[:n], from)
			}
		}
	}()
	go func() {
		_ = http.Serve(meta.Listen(metadataIP+":80"), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("fake-metadata\n"))
		}))
	}()
	h := &harness{t: t, r: r, sidecar: sc.Addr.String() + ":3128"}
	h.args = []string{
		"--public-tcp", publicIP + ":443", "--public-dns", resolverIP + ":53",
		"--metadata", metadataIP + ":80", "--apiserver", api.Addr.String() + ":6443",
		"--sidecar", h.sidecar, "--ipv6", "off", "--timeout", "300ms", "--interval", "50ms",
	}
	return h
}

// CNI behaviours, as nftables rules in the pod's namespace.
const (
	enforceDrop = "drop"
	enforceRej  = "reject"
	udpHole     = "udp-hole"
	cutOff      = "cut-off"
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
	bin := buildAF(h.t)
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

func routesWith(as []Attempt, o Outcome) []string {
	var out []string
	for _, a := range as {
		if a.Outcome == o {
			out = append(out, a.Route)
		}
	}
	return out
}

func TestGateScenarios(t *testing.T) {
	h := newHarness(t)
	all := []string{RouteTCP, RouteDNS, RouteMetadata, RouteAPIServer}

	t.Run("enforcing by dropping", func(t *testing.T) {
		pod := h.r.Attach("pod1")
		h.enforce(pod, enforceDrop)
		g := h.gate(pod, "--deadline", "10s")
		if g.code != 0 || g.res.Verdict != Contained || len(routesWith(g.res.Routes, Denied)) != 4 {
			t.Fatalf("exit %d\n%s", g.code, g.out)
		}
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
	})
	t.Run("not enforcing", func(t *testing.T) {
		pod := h.r.Attach("pod3")
		g := h.gate(pod, "--deadline", "2s")
		if g.code != 3 || g.res.Verdict != Escape || strings.Join(routesWith(g.res.Routes, Escaped), ",") != strings.Join(all, ",") {
			t.Fatalf("exit %d, escaped %v\n%s", g.code, routesWith(g.res.Routes, Escaped), g.out)
		}
		for _, r := range all {
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
		if g.code != 3 || strings.Join(routesWith(g.res.Routes, Escaped), ",") != RouteDNS {
			t.Fatalf("exit %d, escaped %v\n%s", g.code, routesWith(g.res.Routes, Escaped), g.out)
		}
	})
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
	if once.code != 3 || len(routesWith(once.res.Routes, Escaped)) != 4 {
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
	if len(g.res.Escaped) != 4 {
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
