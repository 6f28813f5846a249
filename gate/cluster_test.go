package gate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/antifailure/af/testcluster"
	"github.com/antifailure/af/version"
)

// TestGatedPodsOnTheCluster starts pods on the real test cluster (an enforcer enforcing) whose
// application container probes the fake internet from its first millisecond, and checks that
// behind the gate no packet of application code gets there, counted where it would arrive. An
// ungated pod in a namespace without policies proves the counter and the route work; ungated
// pods under default-deny show the startup window the gate closes. Pods start five at a time
// while others end and are deleted, as a rollout's do; nothing else may run on the cluster
// meanwhile, since the counter sees every pod's packets.
func TestGatedPodsOnTheCluster(t *testing.T) {
	h := testcluster.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	h.RequireState(t, testcluster.StateEnforcing) // without an enforcer the gate would rightly refuse
	kubectl := func(stdin string, args ...string) string {
		t.Helper()
		out, err := h.Kubectl(ctx, stdin, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	// The engine image, built from this tree and imported into the node.
	if err := h.ImportEngineImage(ctx, ".."); err != nil {
		t.Fatal(err)
	}

	// Application code's targets are the public address's TCP and UDP echo; the gate's routes
	// go elsewhere (the blocked API host, the resolver), so a counter on the public address
	// sees only application packets.
	public, _, _ := strings.Cut(h.Internet.PublicTCP, ":")
	counter := newArrivalCounter(t, public)

	ns := fmt.Sprintf("af-gate-%04x", rand.UintN(0xffff))
	open := ns + "-open"
	kubectl("", "create", "namespace", ns)
	kubectl("", "create", "namespace", open)
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = h.Kubectl(c, "", "delete", "namespace", ns, open, "--wait=false")
	})
	kubectl(fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny-all, namespace: %[1]s}
spec:
  podSelector: {}
  policyTypes: [Ingress, Egress]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: to-sidecar, namespace: %[1]s}
spec:
  podSelector: {matchLabels: {role: app}}
  policyTypes: [Egress]
  egress:
  - to: [{podSelector: {matchLabels: {role: sidecar}}}]
    ports: [{protocol: TCP, port: 3128}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: sidecar-in, namespace: %[1]s}
spec:
  podSelector: {matchLabels: {role: sidecar}}
  policyTypes: [Ingress]
  ingress:
  - from: [{podSelector: {matchLabels: {role: app}}}]
    ports: [{protocol: TCP, port: 3128}]
`, ns), "apply", "-f", "-")
	// A stand-in sidecar: the gate needs its proxy port to accept.
	sidecar := func(namespace string) string {
		kubectl(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: sidecar, namespace: %s, labels: {role: sidecar}}
spec:
  terminationGracePeriodSeconds: 1
  automountServiceAccountToken: false
  containers:
  - name: main
    image: %s
    imagePullPolicy: Never
    command: [aftool, serve, -tcp, ":3128"]
    readinessProbe: {tcpSocket: {port: 3128}, periodSeconds: 1}
`, namespace, h.TestImage), "apply", "-f", "-")
		kubectl("", "-n", namespace, "wait", "--for=condition=Ready", "pod/sidecar", "--timeout=120s")
		return strings.TrimSpace(kubectl("", "-n", namespace, "get", "pod", "sidecar", "-o", "jsonpath={.status.podIP}"))
	}
	sidecarIP := sidecar(ns)
	openSidecarIP := sidecar(open)

	probeCmd := fmt.Sprintf(`[aftool, probe, -tcp, %q, -udp, %q, -interval, 50ms, -for, 2s]`, h.Internet.PublicTCP, h.Internet.PublicUDP)
	pod := func(namespace, name string, gated bool) string {
		init := ""
		sidecarIP := sidecarIP
		if namespace == open {
			sidecarIP = openSidecarIP
		}
		if gated {
			init = fmt.Sprintf(`  initContainers:
  - name: af-gate
    image: %s
    imagePullPolicy: Never
    args: [gate, --public-tcp, %q, --public-dns, %q, --metadata, %q, --apiserver, %q, --sidecar, %q, --ipv6, "off", --timeout, 300ms, --interval, 50ms, --deadline, 60s]
    securityContext: {runAsNonRoot: true, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
`, version.LocalEngineImage, h.Internet.BlockedAPIIP+":80", h.Internet.Resolver, h.Internet.Metadata, h.APIServerIP+":6443", sidecarIP+":3128")
		}
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s, labels: {role: app}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  automountServiceAccountToken: false
%s  containers:
  - name: app
    image: %s
    imagePullPolicy: Never
    command: %s
`, name, namespace, init, h.TestImage, probeCmd)
	}
	// run starts one pod, waits for it to end and reads its logs; it is called from several
	// goroutines at once, so it returns its error rather than failing the test.
	run := func(namespace, name string, gated bool) (appOK int, gateLog string, err error) {
		step := func(stdin string, args ...string) string {
			if err != nil {
				return ""
			}
			var out string
			if out, err = h.Kubectl(ctx, stdin, args...); err != nil {
				err = fmt.Errorf("%s: %w", name, err)
			}
			return out
		}
		step(pod(namespace, name, gated), "apply", "-f", "-")
		step("", "-n", namespace, "wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/"+name, "--timeout=180s")
		logs := step("", "-n", namespace, "logs", name, "-c", "app")
		for _, m := range regexp.MustCompile(`SUMMARY \w+ attempts=\d+ ok=(\d+)`).FindAllStringSubmatch(logs, -1) {
			n, _ := strconv.Atoi(m[1])
			appOK += n
		}
		if gated {
			gateLog = step("", "-n", namespace, "logs", name, "-c", "af-gate")
		}
		step("", "-n", namespace, "delete", "pod", name, "--wait=false")
		return appOK, gateLog, err
	}
	// starts runs n pods, at most `wide` at once: pods that start together make the enforcer
	// learn several new addresses at once, as a deployment's rollout does.
	type start struct {
		appOK   int
		gateLog string
		err     error
	}
	starts := func(prefix string, n, wide int, gated bool) []start {
		t.Helper()
		res := make([]start, n)
		slots := make(chan struct{}, wide)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			slots <- struct{}{}
			go func() {
				defer func() { <-slots; wg.Done() }()
				r := &res[i]
				r.appOK, r.gateLog, r.err = run(ns, fmt.Sprintf("%s-%d", prefix, i), gated)
			}()
		}
		wg.Wait()
		for _, r := range res {
			if r.err != nil {
				t.Fatal(r.err)
			}
		}
		return res
	}

	// The gate's own routes work from a pod without policies: in the open namespace the gate
	// must refuse, naming every route. Otherwise its "contained" below would prove nothing. It
	// holds until its deadline (60 s), so it runs beside the rest and is read at the end; its
	// routes do not go to the public address the counter watches.
	kubectl(pod(open, "gate-control", true), "apply", "-f", "-")

	// Positive control: with no policy, the application reaches the public address and the
	// counter sees it. Otherwise "nothing arrived" would prove nothing.
	counter.reset()
	if ok, _, err := run(open, "control", false); err != nil || ok == 0 || counter.read() == 0 {
		t.Fatalf("positive control: the app got %d echoes, the counter saw %d packets (%v)", ok, counter.read(), err)
	}

	// The window: ungated pods under default-deny.
	counter.reset()
	ungatedEscapes := 0
	for _, r := range starts("ungated", 5, 5, false) {
		ungatedEscapes += r.appOK
	}
	ungatedArrived := counter.read()

	// Gated: 20 starts, five at a time, and nothing from application code arrives.
	counter.reset()
	gateSawEscapes := 0
	for i, r := range starts("gated", 20, 5, true) {
		res, found := ParseVerdict(r.gateLog)
		if !found || res.Verdict != Contained {
			t.Fatalf("gated-%d: gate verdict %+v\n%s", i, res, r.gateLog)
		}
		if r.appOK != 0 {
			t.Errorf("gated-%d: application code got %d echoes", i, r.appOK)
		}
		if len(res.Escaped) > 0 {
			gateSawEscapes++
		}
	}
	if n := counter.read(); n != 0 {
		t.Errorf("%d application packets reached the fake internet behind the gate", n)
	}
	if _, err := h.Kubectl(ctx, "", "-n", open, "wait", "--for=jsonpath={.status.phase}=Failed", "pod/gate-control", "--timeout=180s"); err != nil {
		phase, _ := h.Kubectl(ctx, "", "-n", open, "get", "pod", "gate-control", "-o", "jsonpath={.status.phase} {.status.podIP}")
		glog, _ := h.Kubectl(ctx, "", "-n", open, "logs", "gate-control", "-c", "af-gate")
		alog, _ := h.Kubectl(ctx, "", "-n", open, "logs", "gate-control", "-c", "app")
		t.Fatalf("gate without policies did not fail: %v; pod %s\ngate:\n%s\napp:\n%s", err, phase, glog, alog)
	}
	code := strings.TrimSpace(kubectl("", "-n", open, "get", "pod", "gate-control", "-o", "jsonpath={.status.initContainerStatuses[0].state.terminated.exitCode}"))
	res, found := ParseVerdict(kubectl("", "-n", open, "logs", "gate-control", "-c", "af-gate"))
	if code != "3" || !found || res.Verdict != Escape || len(routesWith(res.Routes, Escaped)) != 4 {
		t.Fatalf("gate without policies: exit %s, verdict %+v", code, res)
	}
	t.Logf("ungated (5 pods): %d echoes, %d packets arrived; gated (20 pods): 0 arrived, the gate itself saw the window open in %d of 20", ungatedEscapes, ungatedArrived, gateSawEscapes)
}

// arrivalCounter counts packets arriving at an address of the fake internet, in the fake
// internet's own namespace, with an nftables counter this test adds and removes.
type arrivalCounter struct {
	t    *testing.T
	addr string
}

const inetNetns = "af-inet"

func newArrivalCounter(t *testing.T, addr string) *arrivalCounter {
	t.Helper()
	c := &arrivalCounter{t: t, addr: addr}
	c.nft(fmt.Sprintf("table inet af_gate_test {\n\tcounter arrivals { }\n\tchain in {\n\t\ttype filter hook prerouting priority -300; policy accept;\n\t\tip daddr %s counter name arrivals\n\t}\n}\n", addr))
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "exec", inetNetns, "nft", "delete", "table", "inet", "af_gate_test").Run()
	})
	return c
}

func (c *arrivalCounter) nft(ruleset string) {
	c.t.Helper()
	cmd := exec.Command("ip", "netns", "exec", inetNetns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(ruleset)
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("nft in %s: %v: %s", inetNetns, err, out)
	}
}

func (c *arrivalCounter) reset() {
	c.t.Helper()
	if out, err := exec.Command("ip", "netns", "exec", inetNetns, "nft", "reset", "counter", "inet", "af_gate_test", "arrivals").CombinedOutput(); err != nil {
		c.t.Fatalf("reset counter: %v: %s", err, out)
	}
}

func (c *arrivalCounter) read() int {
	c.t.Helper()
	out, err := exec.Command("ip", "netns", "exec", inetNetns, "nft", "list", "counter", "inet", "af_gate_test", "arrivals").CombinedOutput()
	if err != nil {
		c.t.Fatalf("read counter: %v: %s", err, out)
	}
	m := regexp.MustCompile(`packets (\d+)`).FindStringSubmatch(string(out))
	if m == nil {
		c.t.Fatalf("counter output: %s", out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
