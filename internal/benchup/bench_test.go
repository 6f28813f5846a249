package benchup

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
	afk8s "github.com/antifailure/af/runtime/kubernetes"
	"github.com/antifailure/af/testcluster"
)

const (
	// exampleManifest is the example the table measures, from the module's root.
	exampleManifest = "examples/shop/af.yaml"
	benchEnv        = "bench"
	plainNS         = "af-bench-plain"
	orderNS         = "af-bench-order"
	// dropComment marks the rule DENY=drop adds, so a run that was killed leaves none behind.
	dropComment  = "af-bench-drop"
	icmpRateFile = "/proc/sys/net/ipv4/icmp_ratelimit"
)

// TestBenchUpTable (make bench-up, AF_BENCH=1): af up and af down of the example on the local
// test cluster (warm images), next to kubectl apply + kubectl wait of the same Deployments and
// Services without policies, sidecar, probe, gate or migration (all at once: the floor), and
// of the same objects with the migration Job applied in af's dependency order (worker and the
// migration together, then web, each waited for): the honest baseline. RUNS rounds each
// (default 3). It ends with one line per ratio of medians: af up less its probe phase (the
// containment proof the baseline has no part of) over the same-order baseline, and af down
// over a bare namespace delete.
//
// DENY says how the cluster's enforcer answers a packet its policies deny. kube-router REJECTs
// (an ICMP port-unreachable from the node), but the node's kernel sends those at most once a
// second per pod after a burst of 6 (net.ipv4.icmp_ratelimit), so as configured ("as-is", the
// default) most denied attempts wait out their timeout. "drop" drops every such answer on the
// node (a raw-table OUTPUT rule for the pod range), "reject" lifts the rate limit so every one
// arrives; both are undone when the test ends. kube-network-policies (ENFORCER=
// kube-network-policies) drops every denied packet: as-is is drop there.
//
// AF_BENCH_IMAGES names the example's images as af up's --image takes them, "web=REF
// worker=REF" (make bench-up builds them with hack/shop-images.sh); bin/af is make build's.
func TestBenchUpTable(t *testing.T) {
	if os.Getenv("AF_BENCH") != "1" {
		t.Skip("a benchmark on the local test cluster: make bench-up (AF_BENCH=1)")
	}
	runs := countEnv(t, "RUNS", 3)
	images, err := parseImages(os.Getenv("AF_BENCH_IMAGES"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(t.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	b := newBench(ctx, t, images)
	label := b.enforcer(ctx, t, envOr("DENY", "as-is"))
	fmt.Printf("enforcer: %s\n", label)
	b.clearLeftovers(ctx, t)
	t.Cleanup(func() {
		if t.Failed() {
			b.clearLeftovers(context.Background(), t)
		}
	})

	fmt.Printf("%-4s %-8s %-9s %-8s %-9s %-9s | %-13s %-13s %-13s\n", "run", "af up", "sidecar", "probe", "services", "af down", "kubectl up", "same order", "kubectl down")
	var (
		ups, probes, downs, orders, kdowns, probeRounds, probeBeyond []int64
		gates, replaced, plainReplaced, replacedEach, plainEach      []Pod
		last                                                         afruntime.Result
	)
	for i := 1; i <= runs; i++ {
		t0 := time.Now()
		out := b.af(ctx, t, b.upArgs()...)
		up := msSince(t0)
		var res afruntime.Result
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("af up -o json: %v\n%s", err, out)
		}
		last = res
		// The phases' lengths; and the probe's own rounds, and how long the probe went on after
		// the sidecar was up (what the probe adds to af up beyond the sidecar starting beside it).
		phase := phases(t, res)
		end := func(name string) int64 { return (phase[name].Start + phase[name].Elapsed).Milliseconds() }
		sidecar, probe, services := phase["sidecar"].Elapsed.Milliseconds(), phase["probe"].Elapsed.Milliseconds(), phase["services"].Elapsed.Milliseconds()
		probeRounds = append(probeRounds, phase["probe rounds"].Elapsed.Milliseconds())
		probeBeyond = append(probeBeyond, end("probe")-end("sidecar"))
		// The gate's time to its verdict in each pod of the environment, from its verdict line:
		// the services' pods and the migration's (the probe's pod is gone by now). During af up
		// the gates start beside the sidecar and wait for it first; their own rounds are the rest.
		pods, err := b.cs.CoreV1().Pods(res.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("listing the pods of %s: %v", res.Namespace, err)
		}
		gates = append(gates, b.read(ctx, res.Namespace, pods.Items, time.Time{})...)
		// Replacements: every service pod deleted at once, its replacement gated with the
		// sidecar up and its hold released (what a pod start costs in a running environment).
		replaced = append(replaced, b.replace(ctx, t, res.Namespace, afk8s.LabelWorkload+"="+afk8s.WorkloadService)...)
		// And one at a time: a pod start that no other start on the node competes with.
		replacedEach = append(replacedEach, b.replaceEach(ctx, t, res.Namespace, afk8s.LabelWorkload+"="+afk8s.WorkloadService)...)
		t0 = time.Now()
		b.af(ctx, t, "down", "-f", b.manifestPath, "--env", benchEnv, "-q")
		down := msSince(t0)

		plain := b.baseline(t, plainNS)
		t0 = time.Now()
		b.kubectl(ctx, t, "", "create", "namespace", plainNS)
		b.apply(ctx, t, plainNS, plain.Plain())
		b.wait(ctx, t, plainNS, "Available", "deploy", plain.DeploymentNames(), 300*time.Second)
		kup := msSince(t0)
		// The same replacements without af (no policies, no gate): the baseline of a pod start.
		plainReplaced = append(plainReplaced, b.replace(ctx, t, plainNS, LabelApp)...)
		plainEach = append(plainEach, b.replaceEach(ctx, t, plainNS, LabelApp)...)
		t0 = time.Now()
		b.kubectl(ctx, t, "", "delete", "namespace", plainNS, "--wait=true")
		kdown := msSince(t0)

		// The same objects in af's dependency order: worker and the migration, then web.
		order := b.baseline(t, orderNS)
		t0 = time.Now()
		b.kubectl(ctx, t, "", "create", "namespace", orderNS)
		for _, step := range order.Steps {
			b.apply(ctx, t, orderNS, step.Objects)
			b.wait(ctx, t, orderNS, "Available", "deploy", step.Deployments, 300*time.Second)
			b.wait(ctx, t, orderNS, "Complete", "job", step.Jobs, 300*time.Second)
		}
		ordered := msSince(t0)
		b.kubectl(ctx, t, "", "delete", "namespace", orderNS, "--wait=true")

		fmt.Printf("%-4d %-8s %-9s %-8s %-9s %-9s | %-13s %-13s %-13s\n", i, ms(up), ms(sidecar), ms(probe), ms(services), ms(down), ms(kup), ms(ordered), ms(kdown))
		ups, probes, downs = append(ups, up), append(probes, probe), append(downs, down)
		orders, kdowns = append(orders, ordered), append(kdowns, kdown)
	}

	// Per-phase table of the last af up (start and length of each, overlaps visible).
	fmt.Println("phases of the last af up:")
	for _, p := range last.Phases {
		fmt.Printf("  %-24s start %6d ms  %6d ms\n", p.Name, p.Start.Milliseconds(), p.Elapsed.Milliseconds())
	}
	mu, mp, md, mo, mk := Median(ups), Median(probes), Median(downs), Median(orders), Median(kdowns)
	fmt.Printf("enforcer: %s\n", label)
	fmt.Printf("probe: its own rounds median %sms; on after the sidecar was up median %sms; whole phase (from its pod written, beside the sidecar) median %sms\n",
		Num(Median(probeRounds)), Num(Median(probeBeyond)), Num(mp))
	gateLine("during af up (beside the sidecar starting)", gates)
	gateLine("per pod start (replacements in a running environment)", replaced)
	gateLine("per pod start, one at a time", replacedEach)
	// What af adds to a pod start: a replacement's delete to its application's first line, in
	// af's environment and in the plain namespace; every service pod at once, then each alone.
	addsLine("pod start, delete to the application's first line", replaced, plainReplaced)
	addsLine("pod start one at a time, delete to the application's first line", replacedEach, plainEach)
	fmt.Printf("medians: af up %sms (probe %sms), kubectl same order %sms, af down %sms, namespace delete %sms\n", Num(mu), Num(mp), Num(mo), Num(md), Num(mk))
	fmt.Printf("ratio af-up/kubectl-same-order = %.2f (af up less its probe phase; goal <= 1.00)\n", (mu-mp)/mo)
	fmt.Printf("ratio af-up-whole/kubectl-same-order = %.2f (with the probe phase; goal <= 1.50)\n", mu/mo)
	fmt.Printf("ratio af-down/namespace-delete = %.2f\n", md/mk)
}

// bench is one table's run: the cluster, af, the example.
type bench struct {
	h            *testcluster.Handle
	cs           kubernetes.Interface
	afBin        string
	manifestPath string
	manifest     *manifest.Manifest
	images       map[string]string
	// shape is the example's plain objects, for what does not depend on their namespace: its
	// Deployments' names and how many pods they run.
	shape *Baseline
	env   []string // af's: the cluster's kubeconfig and the gate's routes at its test hosts
}

func newBench(ctx context.Context, t *testing.T, images map[string]string) *bench {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	b := &bench{afBin: filepath.Join(root, "bin", "af"), manifestPath: filepath.Join(root, exampleManifest), images: images}
	if _, err := os.Stat(b.afBin); err != nil {
		t.Fatalf("no bin/af (make build): %v", err)
	}
	res, err := manifest.Load(b.manifestPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(b.manifestPath); err != nil {
		t.Fatal(err)
	}
	b.manifest = res.Manifest
	// The images must cover what the manifest builds before anything runs.
	b.shape = b.baseline(t, plainNS)
	if b.h, err = testcluster.Open(ctx); err != nil {
		t.Fatalf("the test cluster (make bench-up brings it up): %v", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", b.h.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if b.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	b.env = append(os.Environ(), b.h.Env()...)
	for k, v := range b.h.GateEnv() {
		b.env = append(b.env, k+"="+v)
	}
	return b
}

// baseline is the example's plain objects in namespace ns.
func (b *bench) baseline(t *testing.T, ns string) *Baseline {
	base, err := NewBaseline(b.manifest, ns, b.images)
	if err != nil {
		t.Fatalf("%s: %v (AF_BENCH_IMAGES, e.g. \"web=REF worker=REF\": make bench-up sets it)", exampleManifest, err)
	}
	return base
}

func (b *bench) upArgs() []string {
	args := []string{"up", "-f", b.manifestPath, "--env", benchEnv, "-q", "-o", "json"}
	for _, name := range sortedKeys(b.images) {
		args = append(args, "--image", name+"="+b.images[name])
	}
	return args
}

// af runs bin/af and returns its standard output.
func (b *bench) af(ctx context.Context, t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, b.afBin, args...)
	cmd.Env = b.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("af %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

func (b *bench) kubectl(ctx context.Context, t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := b.h.Kubectl(ctx, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (b *bench) apply(ctx context.Context, t *testing.T, ns string, objects []any) {
	t.Helper()
	data, err := List(objects)
	if err != nil {
		t.Fatal(err)
	}
	b.kubectl(ctx, t, string(data), "-n", ns, "apply", "-f", "-")
}

// wait is kubectl wait for condition on the objects of kind named (none: nothing to wait for).
func (b *bench) wait(ctx context.Context, t *testing.T, ns, condition, kind string, names []string, timeout time.Duration) {
	t.Helper()
	if len(names) == 0 {
		return
	}
	args := []string{"-n", ns, "wait", "--for=condition=" + condition, "--timeout=" + timeout.String()}
	for _, n := range names {
		args = append(args, kind+"/"+n)
	}
	b.kubectl(ctx, t, "", args...)
}

// addsLine prints what af adds to a pod start: the median of delete to the application's first
// line in af's environment less the same in the plain namespace.
func addsLine(what string, withAf, plain []Pod) {
	if len(withAf) == 0 || len(plain) == 0 {
		return
	}
	ga, pl := starts(withAf), starts(plain)
	mg, mpl := Median(ga), Median(pl)
	fmt.Printf("%s: with af median %sms over %d pods, plain median %sms over %d; af adds %sms (goal <= 2500 where the enforcer drops, <= 1500 where it rejects)\n",
		what, Num(mg), len(ga), Num(mpl), len(pl), Num(mg-mpl))
}

// replace deletes every pod of namespace ns that selector picks (all at once), waits for as
// many replacements to be ready, and reads their gates, their starts timed from the delete.
func (b *bench) replace(ctx context.Context, t *testing.T, ns, selector string) []Pod {
	t.Helper()
	return b.replaceWith(ctx, t, ns, selector, b.shape.Pods, "pods", "-l", selector)
}

// replaceEach deletes the pods of namespace ns that selector picks one after the other, each
// once the one before it has been replaced, and reads each replacement as replace does.
func (b *bench) replaceEach(ctx context.Context, t *testing.T, ns, selector string) []Pod {
	t.Helper()
	pods, err := b.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("listing the pods of %s: %v", ns, err)
	}
	var out []Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue // one that replace deleted, still ending: its replacement is already up
		}
		out = append(out, b.replaceWith(ctx, t, ns, selector, 1, "pod/"+p.Name)...)
	}
	return out
}

// replaceWith deletes what target names (kubectl delete's arguments) in namespace ns, waits
// for want new pods that selector picks to be ready, and reads them.
func (b *bench) replaceWith(ctx context.Context, t *testing.T, ns, selector string, want int, target ...string) []Pod {
	t.Helper()
	list := func() []corev1.Pod {
		pods, err := b.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			t.Fatalf("listing the pods of %s: %v", ns, err)
		}
		return pods.Items
	}
	old := map[string]bool{}
	for _, p := range list() {
		old[p.Name] = true
	}
	del := time.Now()
	b.kubectl(ctx, t, "", append(append([]string{"-n", ns, "delete"}, target...), "--wait=false")...)
	b.wait(ctx, t, ns, "Available", "deploy", b.shape.DeploymentNames(), 120*time.Second)
	var fresh []corev1.Pod
	for range 100 {
		fresh = slices.DeleteFunc(list(), func(p corev1.Pod) bool { return old[p.Name] })
		if len(fresh) >= want {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(fresh) == 0 {
		t.Fatalf("no pod of %s (%s) was replaced", ns, selector)
	}
	names := make([]string, len(fresh))
	for i, p := range fresh {
		names[i] = p.Name
	}
	b.wait(ctx, t, ns, "Ready", "pod", names, 120*time.Second)
	return b.read(ctx, ns, fresh, del)
}

// read reads each pod's gate and its application's first line (since: the moment its start is
// timed from, zero for none).
func (b *bench) read(ctx context.Context, ns string, pods []corev1.Pod, since time.Time) []Pod {
	var out []Pod
	for _, pod := range pods {
		if len(pod.Spec.Containers) == 0 {
			continue
		}
		gateLog := b.logs(ctx, ns, pod.Name, afk8s.GateContainer, 0)
		appLog := b.logs(ctx, ns, pod.Name, pod.Spec.Containers[0].Name, 64<<10)
		if p, ok := ReadPod(gateLog, appLog, since); ok {
			out = append(out, p)
		}
	}
	return out
}

// logs is one container's log with the kubelet's timestamps ("" when there is none: a pod
// without a gate), at most limit bytes of it (0: all).
func (b *bench) logs(ctx context.Context, ns, pod, container string, limit int64) string {
	opts := &corev1.PodLogOptions{Container: container, Timestamps: true}
	if limit > 0 {
		opts.LimitBytes = &limit
	}
	data, err := b.cs.CoreV1().Pods(ns).GetLogs(pod, opts).DoRaw(ctx)
	if err != nil {
		return ""
	}
	return string(data)
}

// enforcer sets how the enforcer's denials reach the pods for the run (DENY), undone when the
// test ends, and says which it is.
func (b *bench) enforcer(ctx context.Context, t *testing.T, deny string) string {
	if err := clearDropRules(ctx); err != nil { // left by a run that was killed
		t.Fatal(err)
	}
	if b.h.Enforcer == testcluster.EnforcerKubeNetworkPolicies {
		// Its verdict is NF_DROP: nothing answers a denied packet, so there is no answer
		// to drop or to let through.
		if deny != "as-is" && deny != "drop" {
			t.Fatalf("DENY=%s: kube-network-policies drops every denied packet; only as-is (= drop) applies", deny)
		}
		return "kube-network-policies as configured: DROP (its verdict in userspace, first packet of each connection)"
	}
	switch deny {
	case "as-is":
		return "kube-router as configured: REJECT, its answers rate-limited by the node"
	case "drop":
		nodes, err := b.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) == 0 || nodes.Items[0].Spec.PodCIDR == "" {
			t.Fatalf("the node's pod range: %v", err)
		}
		rule := []string{"OUTPUT", "-p", "icmp", "--icmp-type", "port-unreachable", "-d", nodes.Items[0].Spec.PodCIDR,
			"-m", "comment", "--comment", dropComment, "-j", "DROP"}
		if _, err := iptables(ctx, append([]string{"-t", "raw", "-I"}, rule...)...); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := iptables(context.Background(), append([]string{"-t", "raw", "-D"}, rule...)...); err != nil {
				t.Error(err)
			}
		})
		return "kube-router, every REJECT answer to a pod dropped on the node"
	case "reject":
		old, err := os.ReadFile(icmpRateFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(icmpRateFile, []byte("0\n"), 0o644); err != nil {
			t.Fatalf("lifting the ICMP rate limit: %v", err)
		}
		t.Cleanup(func() {
			if err := os.WriteFile(icmpRateFile, old, 0o644); err != nil {
				t.Errorf("restoring net.ipv4.icmp_ratelimit to %s: %v", bytes.TrimSpace(old), err)
			}
		})
		return "kube-router, every REJECT answered (the node's ICMP rate limit lifted)"
	}
	t.Fatalf("DENY must be as-is, drop or reject, not %s", deny)
	return ""
}

// clearDropRules deletes every rule DENY=drop added to the raw table's OUTPUT chain.
func clearDropRules(ctx context.Context) error {
	rules, err := iptables(ctx, "-t", "raw", "-S", "OUTPUT")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(rules, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[0] == "-A" && slices.Contains(f, dropComment) {
			if _, err := iptables(ctx, append([]string{"-t", "raw", "-D"}, f[1:]...)...); err != nil {
				return err
			}
		}
	}
	return nil
}

func iptables(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "iptables", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// clearLeftovers removes what a run that failed or was killed left: the environment and the
// plain namespaces.
func (b *bench) clearLeftovers(ctx context.Context, t *testing.T) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if out, err := b.h.Kubectl(ctx, "", "delete", "namespace", plainNS, orderNS, "--ignore-not-found", "--wait=true"); err != nil {
		t.Logf("removing the plain namespaces: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(ctx, b.afBin, "down", "-f", b.manifestPath, "--env", benchEnv, "-q")
	cmd.Env = b.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Logf("af down --env %s: %v\n%s", benchEnv, err, out)
	}
}

// phases are an af up's phases by name; the table needs the sidecar's, the probe's, its
// rounds' and the services'.
func phases(t *testing.T, res afruntime.Result) map[string]afruntime.Phase {
	t.Helper()
	out := map[string]afruntime.Phase{}
	for _, p := range res.Phases {
		out[p.Name] = p
	}
	for _, name := range []string{"sidecar", "probe", "probe rounds", "services"} {
		if _, ok := out[name]; !ok {
			t.Fatalf("af up -o json has no phase %q: %+v", name, res.Phases)
		}
	}
	return out
}

// gateLine prints the gates' figures over the pods that have a gate (none: no line).
func gateLine(what string, pods []Pod) {
	var total, side, rounds, hand []int64
	refused, timedOut := 0, 0
	for _, p := range pods {
		if !p.Gated {
			continue
		}
		total, side, rounds = append(total, p.Gate), append(side, p.Sidecar), append(rounds, p.Rounds)
		if p.HasHandoff {
			hand = append(hand, p.Handoff)
		}
		refused += p.Refused
		timedOut += p.TimedOut
	}
	if len(total) == 0 {
		return
	}
	fmt.Printf("gate %s, over %d pods: its rounds median %sms (max %dms); with its wait for the sidecar median %sms (the wait alone %sms); then the application's first line %sms after the gate's last; attempts denied: %d refused, %d timed out\n",
		what, len(total), Num(Median(rounds)), slices.Max(rounds), Num(Median(total)), Num(Median(side)), Num(Median(hand)), refused, timedOut)
}

// starts are the pods' times from the delete to their application's first line.
func starts(pods []Pod) []int64 {
	var out []int64
	for _, p := range pods {
		if p.HasStart {
			out = append(out, p.Start)
		}
	}
	return out
}

// parseImages reads "web=REF worker=REF" (spaces or commas between).
func parseImages(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' || r == '\n' }) {
		name, ref, ok := strings.Cut(f, "=")
		if !ok || name == "" || ref == "" {
			return nil, fmt.Errorf("AF_BENCH_IMAGES: %q is not SERVICE=IMAGE", f)
		}
		out[name] = ref
	}
	return out, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func msSince(t time.Time) int64 { return time.Since(t).Milliseconds() }

// countEnv is the positive number the environment variable name holds, def when it is unset.
func countEnv(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s must be a positive number, not %q", name, s)
	}
	return n
}

func ms(n int64) string { return strconv.FormatInt(n, 10) + "ms" }
