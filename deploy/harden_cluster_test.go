package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/harden"
	"github.com/antifailure/af/internal/afbuild"
	"github.com/antifailure/af/testcluster"
	"github.com/antifailure/af/version"
)

// asShipped returns the path of a manifest of deploy/ to apply and the image it names, that
// image made locally by its name (this tree's af): the file as written, or, when a release
// pinned the image by digest (hack/release.sh: a digest names one build, which this tree's is
// not), a copy with this tree's image by the release's tag in its place, every other line as
// written.
func asShipped(t *testing.T, ctx context.Context, h *testcluster.Handle, path string) (string, string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s+image:\s*(\S+)(\s+#.*)?$`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("%s names no image", path)
	}
	image, shipped := string(m[1]), path
	if version.PinnedActionImage(image) {
		t.Logf("%s pins %s; this tree's build runs as %s instead", path, image, version.ActionImage)
		shipped = filepath.Join(t.TempDir(), filepath.Base(path))
		if err := os.WriteFile(shipped, []byte(strings.ReplaceAll(string(data), image, version.ActionImage)), 0o644); err != nil {
			t.Fatal(err)
		}
		image = version.ActionImage
	}
	if err := h.ImportEngineImageAs(ctx, "..", image); err != nil {
		t.Fatal(err)
	}
	return shipped, image
}

// checkRun is one af check, as af-ci, as a pipeline runs it.
type checkRun struct {
	Exit   int
	Out    string
	ErrOut string
	Result struct {
		Contained bool             `json:"contained"`
		Namespace string           `json:"namespace"`
		Removed   bool             `json:"removed"`
		Hardening []harden.Report  `json:"hardening"`
		Advice    []harden.Advice  `json:"advice"`
		Cluster   []map[string]any `json:"cluster"`
	}
}

// afCheckAsCI runs af check -o json with af-ci's identity (deploy/ci applied as written) and the
// test cluster's targets.
func afCheckAsCI(t *testing.T, ctx context.Context, h *testcluster.Handle) checkRun {
	t.Helper()
	if err := h.ImportEngineImage(ctx, ".."); err != nil {
		t.Fatal(err)
	}
	flat, err := h.CIKubeconfig(ctx, "..", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "af-ci.kubeconfig")
	if err := os.WriteFile(kc, []byte(flat), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "KUBECONFIG="+kc, "AF_ENGINE_IMAGE="+version.LocalEngineImage, "AF_REQUIRE_BOUNDED_CREDENTIAL=1")
	for k, v := range h.GateEnv() {
		env = append(env, k+"="+v)
	}
	cmd := exec.CommandContext(ctx, afbuild.Binary(t), "check", "-o", "json")
	cmd.Env = env
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	r := checkRun{Out: out.String(), ErrOut: errOut.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.Exit = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(r.Out), &r.Result); err != nil {
		t.Fatalf("af check -o json (exit %d) is not JSON: %v\n%s\n%s", r.Exit, err, r.Out, r.ErrOut)
	}
	if !r.Result.Removed || !strings.HasPrefix(r.Result.Namespace, "af-env-af-check-") {
		t.Errorf("af check left its namespace %q (removed %v)", r.Result.Namespace, r.Result.Removed)
	}
	t.Logf("af check as af-ci: exit %d, contained %v, advice %+v", r.Exit, r.Result.Contained, r.Result.Advice)
	return r
}

// advised is every route the check's advice names, and whether each advice's fix names want.
func (r checkRun) advised(want string) ([]string, bool) {
	var routes []string
	all := true
	for _, a := range r.Result.Advice {
		routes = append(routes, a.Routes...)
		all = all && strings.Contains(a.Fix, want)
	}
	slices.Sort(routes)
	return slices.Compact(routes), all
}

// TestCheckAsCI: af check, run with af-ci's rights only, says what the cluster in front of it
// is, whatever state make test left it in: enforcing, every route denied and exit 0; without an
// enforcer, the routes off the cluster open, the fix "run an enforcer", exit 3 (AF-RUN-059).
// The holes' shapes are TestHardenOnTheShape's.
func TestCheckAsCI(t *testing.T) {
	h := testcluster.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	o, err := h.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	enforcing, _ := testcluster.StateEnforcing.Is(o)
	none, _ := testcluster.StateNoEnforcer.Is(o)
	r := afCheckAsCI(t, ctx, h)
	switch {
	case enforcing:
		if r.Exit != 0 || !r.Result.Contained || len(r.Result.Advice) > 0 {
			t.Errorf("an enforcing cluster: exit %d, contained %v, advice %+v\n%s", r.Exit, r.Result.Contained, r.Result.Advice, r.ErrOut)
		}
	case none:
		routes, _ := r.advised("")
		if r.Exit != 3 || r.Result.Contained || !slices.Contains(routes, "tcp-public") || !slices.Contains(routes, "udp-dns") ||
			len(r.Result.Advice) == 0 || !strings.Contains(r.Result.Advice[0].Fix, "Run an enforcer") {
			t.Errorf("no enforcer: exit %d, contained %v, advice %+v", r.Exit, r.Result.Contained, r.Result.Advice)
		}
	default:
		t.Fatalf("PRECONDITION: the cluster enforcing or without an enforcer (holes: TestHardenOnTheShape); observed %+v", o)
	}
}

// shapeRoutes are the routes af check must name open on each shape (its enforcer, holes open).
var shapeRoutes = map[string][]string{
	// k3s: kube-router's NodePort exemption (the node's listener in the range, and the range
	// itself) and pods' IPv6 link-local segment.
	testcluster.EnforcerKubeRouter: {"ipv6-link-local", "node-local", "node-unannounced"},
	// kind: the node outside kube-network-policies' hooks (the kubelet, the API server on the
	// node) and the link-local segment.
	testcluster.EnforcerKubeNetworkPolicies: {"apiserver", "ipv6-link-local", "node-local"},
}

// TestHardenOnTheShape: on the shape of a cluster teams have (kube-router as k3s runs it, or
// kube-network-policies as kind's kindnet does: the holes open), af check as af-ci names the
// open routes with deploy/harden as their fix and exits 3; deploy/harden/harden.yaml applied
// as written reports every node hardened within its period, and af check then says contained
// with exit 0 and shows the nodes' reports. It leaves deploy/harden in place for what runs
// next on the shape (af up, conformance); TestHardenKeepsItsRules takes it out.
func TestHardenOnTheShape(t *testing.T) {
	h := testcluster.Require(t)
	h.RequireState(t, testcluster.StateHoles)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	o, err := h.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := shapeRoutes[o.Enforcer()]
	if want == nil {
		t.Fatalf("no shape for enforcer %q", o.Enforcer())
	}
	if o.LinkLocalRule || o.NodePortGuard || o.KubeNetworkPoliciesNode || o.PodIPv6Off {
		t.Fatalf("PRECONDITION: the shape as teams get it, no rule of af's on the node and IPv6 on in pods; observed %+v", o)
	}
	before := afCheckAsCI(t, ctx, h)
	routes, fixed := before.advised("deploy/harden")
	if before.Exit != 3 || before.Result.Contained || !slices.Equal(routes, want) || !fixed {
		t.Errorf("the %s shape: exit %d, contained %v, routes %v (want %v), every fix deploy/harden %v\n%+v",
			o.Enforcer(), before.Exit, before.Result.Contained, routes, want, fixed, before.Result.Advice)
	}

	shipped, _ := asShipped(t, ctx, h, filepath.Join("harden", "harden.yaml"))
	start := time.Now()
	if out, err := h.Kubectl(ctx, "", "apply", "-f", shipped); err != nil {
		t.Fatalf("kubectl apply -f deploy/harden/harden.yaml: %v\n%s", err, out)
	}
	rep := waitReport(t, ctx, h, func(r harden.Report) error {
		if !r.Hardened() || len(r.Rules) == 0 {
			return fmt.Errorf("not hardened yet: %+v", r.Rules)
		}
		return nil
	})
	t.Logf("deploy/harden applied to every node hardened: %s (%s: %+v)", time.Since(start).Round(100*time.Millisecond), rep.Found.Enforcer, rep.Rules)
	if string(rep.Found.Enforcer) != o.Enforcer() {
		t.Errorf("deploy/harden read enforcer %q, the cluster runs %s", rep.Found.Enforcer, o.Enforcer())
	}
	after := afCheckAsCI(t, ctx, h)
	if after.Exit != 0 || !after.Result.Contained || len(after.Result.Advice) > 0 || len(after.Result.Hardening) != 1 || !after.Result.Hardening[0].Hardened() {
		t.Errorf("the %s shape hardened: exit %d, contained %v, reports %+v\n%s", o.Enforcer(), after.Exit, after.Result.Contained, after.Result.Hardening, after.ErrOut)
	}
	enf := after.enforcer()
	if enf != o.Enforcer() {
		t.Errorf("af check names enforcer %q, the cluster runs %s: %v", enf, o.Enforcer(), after.Result.Cluster)
	}
}

// waitReport waits until deploy/harden's one node report satisfies ok.
func waitReport(t *testing.T, ctx context.Context, h *testcluster.Handle, ok func(harden.Report) error) harden.Report {
	t.Helper()
	var last error
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		out, err := h.Kubectl(ctx, "", "-n", harden.Namespace, "get", "configmaps", "-l", harden.ReportLabel+"="+harden.ReportLabelValue, "-o", "json")
		if err != nil {
			last = err
			continue
		}
		var list struct {
			Items []struct {
				Data map[string]string `json:"data"`
			} `json:"items"`
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Items) != 1 {
			last = fmt.Errorf("%d reports (%v)", len(list.Items), err)
			continue
		}
		var rep harden.Report
		if err := json.Unmarshal([]byte(list.Items[0].Data[harden.ReportKey]), &rep); err != nil {
			last = err
			continue
		}
		if last = ok(rep); last == nil {
			return rep
		}
	}
	// Why: the agent's pods, their events and their last lines.
	var why []string
	for _, args := range [][]string{
		{"-n", harden.Namespace, "get", "daemonsets,pods", "-o", "wide"},
		{"-n", harden.Namespace, "get", "events", "--sort-by=.lastTimestamp"},
		{"-n", harden.Namespace, "logs", "daemonset/af-harden", "--tail=20", "--all-containers"},
	} {
		out, err := h.Kubectl(context.Background(), "", args...)
		why = append(why, fmt.Sprintf("$ kubectl %s (%v)\n%s", strings.Join(args, " "), err, out))
	}
	t.Fatalf("deploy/harden's report: %v\n%s", last, strings.Join(why, "\n"))
	return harden.Report{}
}

// nodeRules are the rules deploy/harden keeps on this node, as its agent plans them from what
// it reads here (the test runs on the node).
func nodeRules(t *testing.T, ctx context.Context, rep harden.Report) []harden.Rule {
	t.Helper()
	rules, _ := harden.Plan(harden.Node{Found: harden.Detect(harden.ReadTables(ctx, harden.Host{}, "/proc/net/netfilter/nfnetlink_queue")),
		PodCIDRs: rep.PodCIDRs, Bridges: rep.Bridges})
	if len(rules) == 0 {
		t.Fatal("no rule planned for this node")
	}
	return rules
}

// scrapeHarden reads the agent's metrics at the node's port 9971 until ok accepts them (its
// pass after a change may be up to a period away) and returns the last scrape.
func scrapeHarden(t *testing.T, ctx context.Context, ok func(string) error) string {
	t.Helper()
	var body string
	last := errors.New("never scraped")
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:9971/metrics", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			last = err
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("status %d: %v", resp.StatusCode, err)
			continue
		}
		body = string(b)
		if last = ok(body); last == nil {
			return body
		}
	}
	t.Fatalf("the agent's metrics at 127.0.0.1:9971: %v\n%s", last, body)
	return ""
}

// present is each rule's presence on the node, by name.
func present(t *testing.T, ctx context.Context, rules []harden.Rule) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, r := range rules {
		ok, _, err := harden.Present(ctx, harden.Host{}, r)
		if err != nil {
			t.Fatal(err)
		}
		out[r.Tool+"/"+r.Chain] = ok
	}
	return out
}

// TestHardenKeepsItsRules: deploy/harden in place (TestHardenOnTheShape), its rules taken out by
// hand are put back within its period (measured, and an event says so); its DaemonSet deleted,
// the rules stay (it fails closed); deploy/harden/uninstall.yaml applied as written removes
// them and reports it; then everything of deploy/harden is deleted, and the shape's holes are
// open again.
func TestHardenKeepsItsRules(t *testing.T) {
	h := testcluster.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	shipped, uninstall := hardenManifests(t, ctx, h)
	if out, err := h.Kubectl(ctx, "", "apply", "-f", shipped); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	rep := waitReport(t, ctx, h, func(r harden.Report) error {
		if !r.Hardened() || len(r.Rules) == 0 {
			return fmt.Errorf("not hardened: %+v", r.Rules)
		}
		return nil
	})
	rules := nodeRules(t, ctx, rep)
	for name, ok := range present(t, ctx, rules) {
		if !ok {
			t.Fatalf("%s reported in place, not on the node", name)
		}
	}
	period := 10 * time.Second // harden.yaml's --period

	// Taken out by hand: each chain's jumps and rules removed, as an operator's flush would.
	if err := harden.RemoveAll(ctx, harden.Host{}); err != nil {
		t.Fatal(err)
	}
	gone := time.Now()
	for _, ok := range present(t, ctx, rules) {
		if ok {
			t.Fatal("a rule survived its removal by hand")
		}
	}
	var back time.Duration
	for time.Since(gone) < 3*period {
		all := true
		for _, ok := range present(t, ctx, rules) {
			all = all && ok
		}
		if all {
			back = time.Since(gone)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if back == 0 {
		t.Fatalf("the rules removed by hand were not put back within 3 periods (%s)", 3*period)
	}
	t.Logf("rules removed by hand put back after %s (period %s)", back.Round(100*time.Millisecond), period)
	waitReport(t, ctx, h, func(r harden.Report) error {
		if r.Reapplied == 0 {
			return fmt.Errorf("the report counts no rule put back")
		}
		return nil
	})
	if out, _ := h.Kubectl(ctx, "", "-n", harden.Namespace, "get", "events", "--field-selector", "reason=RulePutBack", "-o", "name"); strings.TrimSpace(out) == "" {
		t.Error("no RulePutBack event")
	}
	// The same in its metrics, scraped where harden.yaml serves them: the node's port 9971
	// (host network; this test runs on the node).
	metrics := scrapeHarden(t, ctx, func(body string) error {
		for _, r := range rules {
			if !regexp.MustCompile(`(?m)^af_harden_rules_put_back_total\{chain="` + r.Chain + `",tool="` + r.Tool + `"\} [1-9]`).MatchString(body) {
				return fmt.Errorf("no put-back counted for %s/%s", r.Tool, r.Chain)
			}
		}
		return nil
	})
	for _, want := range []string{"af_harden_hardened 1", `af_harden_enforcer{enforcer="` + string(rep.Found.Enforcer) + `"} 1`} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("the agent's metrics lack %q", want)
		}
	}
	for _, r := range rules {
		if want := `af_harden_rule_in_place{chain="` + r.Chain + `",tool="` + r.Tool + `"} 1`; !strings.Contains(metrics, want+"\n") {
			t.Errorf("the agent's metrics lack %q", want)
		}
	}

	// The DaemonSet deleted, its pod gone: the rules stay.
	if out, err := h.Kubectl(ctx, "", "-n", harden.Namespace, "delete", "daemonset", "af-harden", "--wait=true"); err != nil {
		t.Fatalf("delete the DaemonSet: %v\n%s", err, out)
	}
	if out, err := h.Kubectl(ctx, "", "-n", harden.Namespace, "wait", "--for=delete", "pod", "-l", "app.kubernetes.io/name=af-harden", "--timeout=60s"); err != nil {
		t.Fatalf("the agent's pod did not go: %v\n%s", err, out)
	}
	time.Sleep(period)
	for name, ok := range present(t, ctx, rules) {
		if !ok {
			t.Errorf("%s gone after the DaemonSet was deleted: the agent must leave its rules (fail closed)", name)
		}
	}

	// The uninstall path removes them, and says so.
	uninstallHarden(t, ctx, h, shipped, uninstall, func() {
		for name, ok := range present(t, ctx, rules) {
			if ok {
				t.Errorf("%s still on the node after the uninstall", name)
			}
		}
	})
	h.RequireState(t, testcluster.StateHoles)
}

// TestHardenLeavesCiliumAlone: on an enforcer that closes what af knows of by itself (Cilium:
// the node is an identity its policies govern, IPv6 off drops the link-local segment), af check
// as af-ci says contained with exit 0; deploy/harden applied as written reads the enforcer from
// the node's packet filter, adds no rule and says why (its report's notes, its metrics), and
// af check then names the enforcer from its report; the uninstall finds nothing of af's to
// remove. The node's packet filter is the same before and after (no chain of af's).
func TestHardenLeavesCiliumAlone(t *testing.T) {
	h := testcluster.Require(t)
	h.RequireState(t, testcluster.StateEnforcing)
	if h.Enforcer != testcluster.EnforcerCilium {
		t.Fatalf("PRECONDITION: the test cluster with Cilium (afcluster up -enforcer cilium); it runs %q", h.Enforcer)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	shipped, uninstall := hardenManifests(t, ctx, h)
	before := afCheckAsCI(t, ctx, h)
	if before.Exit != 0 || !before.Result.Contained || len(before.Result.Advice) > 0 {
		t.Errorf("af check on Cilium: exit %d, contained %v, advice %+v\n%s", before.Exit, before.Result.Contained, before.Result.Advice, before.ErrOut)
	}
	afChains := func() []string {
		var found []string
		tables := harden.ReadTables(ctx, harden.Host{}, "/proc/net/netfilter/nfnetlink_queue")
		for _, chain := range harden.Chains {
			if strings.Contains(tables.IPv4, ":"+chain+" ") || strings.Contains(tables.IPv6, ":"+chain+" ") {
				found = append(found, chain)
			}
		}
		return found
	}
	if c := afChains(); len(c) > 0 {
		t.Fatalf("PRECONDITION: no chain of af's on the node; found %v", c)
	}

	if out, err := h.Kubectl(ctx, "", "apply", "-f", shipped); err != nil {
		t.Fatalf("kubectl apply -f deploy/harden/harden.yaml: %v\n%s", err, out)
	}
	rep := waitReport(t, ctx, h, func(r harden.Report) error {
		if r.Found.Enforcer == harden.Unknown || len(r.Notes) == 0 {
			return fmt.Errorf("no reading yet: %+v", r)
		}
		return nil
	})
	t.Logf("deploy/harden on Cilium: enforcer %s (%s), rules %+v, notes %q", rep.Found.Enforcer, rep.Found.Evidence, rep.Rules, rep.Notes)
	if rep.Found.Enforcer != harden.Cilium || len(rep.Rules) != 0 || !rep.Hardened() || !strings.Contains(strings.Join(rep.Notes, " "), "af knows no hole") {
		t.Errorf("deploy/harden on Cilium: enforcer %q, rules %+v, hardened %v, notes %q", rep.Found.Enforcer, rep.Rules, rep.Hardened(), rep.Notes)
	}
	metrics := scrapeHarden(t, ctx, func(body string) error {
		if !strings.Contains(body, `af_harden_enforcer{enforcer="cilium"} 1`+"\n") {
			return errors.New("no af_harden_enforcer for cilium")
		}
		return nil
	})
	if strings.Contains(metrics, "af_harden_rule_in_place{") {
		t.Errorf("the agent's metrics count a rule in place on Cilium:\n%s", metrics)
	}
	if c := afChains(); len(c) > 0 {
		t.Errorf("deploy/harden added %v on Cilium", c)
	}
	after := afCheckAsCI(t, ctx, h)
	enf := after.enforcer()
	if after.Exit != 0 || !after.Result.Contained || len(after.Result.Advice) > 0 || len(after.Result.Hardening) != 1 || enf != string(harden.Cilium) {
		t.Errorf("af check with deploy/harden on Cilium: exit %d, contained %v, enforcer %q, reports %+v\n%s", after.Exit, after.Result.Contained, enf, after.Result.Hardening, after.ErrOut)
	}

	uninstallHarden(t, ctx, h, shipped, uninstall, func() {
		if c := afChains(); len(c) > 0 {
			t.Errorf("%v on the node after the uninstall", c)
		}
	})
	h.RequireState(t, testcluster.StateEnforcing)
}

// enforcer is the enforcer af check names among its facts ("" when none).
func (r checkRun) enforcer() string {
	for _, f := range r.Result.Cluster {
		if f["name"] == "enforcer" {
			v, _ := f["value"].(string)
			return v
		}
	}
	return ""
}

// hardenManifests are deploy/harden's manifests as shipped (harden.yaml, uninstall.yaml), with
// everything of them removed from the cluster and the node when the test ends.
func hardenManifests(t *testing.T, ctx context.Context, h *testcluster.Handle) (shipped, uninstall string) {
	t.Helper()
	shipped, _ = asShipped(t, ctx, h, filepath.Join("harden", "harden.yaml"))
	uninstall, _ = asShipped(t, ctx, h, filepath.Join("harden", "uninstall.yaml"))
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		_, _ = h.Kubectl(c, "", "delete", "--ignore-not-found", "--wait=true", "-f", uninstall)
		_, _ = h.Kubectl(c, "", "delete", "--ignore-not-found", "--wait=true", "-f", shipped)
		_ = harden.RemoveAll(c, harden.Host{})
	})
	return shipped, uninstall
}

// uninstallHarden applies deploy/harden/uninstall.yaml as written, waits for its report,
// checks the node with after, then deletes everything of deploy/harden.
func uninstallHarden(t *testing.T, ctx context.Context, h *testcluster.Handle, shipped, uninstall string, after func()) {
	t.Helper()
	if out, err := h.Kubectl(ctx, "", "apply", "-f", uninstall); err != nil {
		t.Fatalf("kubectl apply -f deploy/harden/uninstall.yaml: %v\n%s", err, out)
	}
	waitReport(t, ctx, h, func(r harden.Report) error {
		if !r.Uninstalled {
			return fmt.Errorf("not uninstalled yet")
		}
		return nil
	})
	after()
	for _, f := range []string{uninstall, shipped} {
		if out, err := h.Kubectl(ctx, "", "delete", "--ignore-not-found", "--wait=true", "-f", f); err != nil {
			t.Errorf("kubectl delete -f %s: %v\n%s", f, err, out)
		}
	}
}
