package kubernetes

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/gate"
	"github.com/antifailure/af/internal/afbuild"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/sidecar/control"
	"github.com/antifailure/af/testcluster"
)

// TestUpTheExample brings the example up on the real cluster and checks the order of what af
// did, the objects it made, that names resolve, that nothing has a token, containment from
// inside a service pod, isolation from a second environment, idempotence and status.
func TestUpTheExample(t *testing.T) {
	besideOthers(t)
	f := setup(t)
	requireEnforcer(t, f.h)
	ctx := ctxFor(t, 20*time.Minute)
	said := &progressTimes{}
	rt := f.runtime(t, said.record)
	ref := afruntime.Ref{ID: "shop-test", Manifest: shop(t), Repository: "acme/shop"}
	down(t, rt, ref)

	events := watchPods(t, f.kube, ref.ID)
	start := time.Now()
	res, err := rt.Up(ctx, afruntime.Spec{Ref: ref, PullRequest: 17, Images: f.images()})
	upTime := time.Since(start)
	seen := events()
	if err != nil {
		t.Fatalf("af up: %v", err)
	}
	ns := res.Namespace
	if ns != "af-env-shop-test" {
		t.Errorf("namespace %q", ns)
	}
	t.Logf("af up of the example: %s; phases %v", upTime.Round(time.Millisecond), res.Phases)

	// Order. Every workload's pods are written while the probe runs, but none of their
	// application containers was seen started before af read the probe's verdict (its
	// progress line; the probe's pod then stays as the watch). The probe starts beside the
	// sidecar, and its rounds wait until the sidecar answers: which of the two pods appears
	// first is not af's order to keep (af writes the sidecar's Deployment first, but its pod
	// comes from the ReplicaSet controller, while af writes the probe pod itself; the probe pod
	// was seen first, by 126 ms, in one run here).
	var sidecarAdded, probeAdded, firstStarted time.Time
	workloadPods := 0
	for _, e := range seen {
		switch {
		case e.role == RoleSidecar && e.kind == watch.Added && sidecarAdded.IsZero():
			sidecarAdded = e.at
		case e.workload == WorkloadProbe && e.kind == watch.Added:
			probeAdded = e.at
		case e.workload == WorkloadProbe && e.kind == watch.Deleted:
			t.Errorf("the probe pod was deleted after a contained verdict: it stays as the watch")
		case (e.workload == WorkloadService || e.workload == WorkloadMigration) && e.kind == watch.Added:
			workloadPods++
		case (e.workload == WorkloadService || e.workload == WorkloadMigration) && e.started && firstStarted.IsZero():
			firstStarted = e.at
		}
	}
	verdictRead := said.first(t, "probe: contained")
	if sidecarAdded.IsZero() || probeAdded.IsZero() || firstStarted.IsZero() || workloadPods < 4 {
		t.Fatalf("missing events: sidecar added %v, probe added %v, first application started %v, %d workload pods", sidecarAdded, probeAdded, firstStarted, workloadPods)
	}
	// (Seen by listing every 100 ms: two events in one listing share a time.)
	if firstStarted.Before(verdictRead) {
		t.Errorf("order: sidecar added %s, probe added %s, verdict read %s, first application started %s", sidecarAdded.Format(time.StampMilli),
			probeAdded.Format(time.StampMilli), verdictRead.Format(time.StampMilli), firstStarted.Format(time.StampMilli))
	}
	// The same to the nanosecond, from the gates' own logs: every pod's gate was released
	// after af read the probe's verdict; web's after af saw both worker instances ready and
	// its migration succeed, and web's first line comes after the migration's last.
	gated, err := f.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelWorkload + " in (" + WorkloadService + "," + WorkloadMigration + ")"})
	if err != nil {
		t.Fatal(err)
	}
	if n := releasedInOrder(t, f, ns, said, gated.Items, map[string][]string{"web": {"worker: 2/2 ready", "migration of web: succeeded"}}); n < 4 {
		t.Errorf("%d pods released, want the migration, two workers and web", n)
	}
	// Nine attempts: the four routes of IPv4, the IPv6 segment, the node on the kubelet and
	// the NodePort-range service over TCP and UDP, and the node's NodePort range unannounced.
	// On a dual-stack cluster seven more: public TCP, DNS and metadata over IPv6, and the node
	// at its IPv6 address the same four ways.
	single := []string{gate.RouteTCP, gate.RouteDNS, gate.RouteMetadata, gate.RouteAPIServer, gate.RouteLinkLocal, gate.RouteNodeUnannounced}
	nodes, want := []string{gate.RouteNode}, 9
	if f.h.DualStack {
		single = append(single, gate.RouteTCP+"-v6", gate.RouteDNS+"-v6", gate.RouteMetadata+"-v6", gate.RouteNodeUnannounced+"-v6")
		nodes, want = append(nodes, gate.RouteNode+"-v6"), 16
	}
	if res.Probe == nil || res.Probe.Verdict != gate.Contained || len(res.Probe.Routes) != want {
		t.Fatalf("probe verdict (want %d routes): %+v", want, res.Probe)
	}
	routes := map[string]int{}
	for _, a := range res.Probe.Routes {
		routes[a.Route]++
	}
	for _, r := range single {
		if routes[r] != 1 {
			t.Errorf("probe route %s tried %d times in the deciding round", r, routes[r])
		}
	}
	for _, r := range nodes {
		if routes[r] != 3 {
			t.Errorf("%s route tried on %d ports, want the kubelet and the NodePort service over TCP and UDP", r, routes[r])
		}
	}
	for _, a := range res.Probe.Routes {
		if a.Outcome != gate.Denied {
			t.Errorf("probe route %s: %s", a.Route, a.Outcome)
		}
	}

	// The preview URL answers through the ingress controller, and reaches the worker.
	if u := res.URLs["web"]; u != "http://shop-test-web.preview.af.test/" || len(res.URLs) != 1 {
		t.Errorf("preview URLs: %v", res.URLs)
	}
	if code, body := f.viaIngress(t, res.URLs["web"]); code != 200 || !strings.Contains(body, `"worker":{"instance":"worker-`) {
		t.Errorf("GET %s: %d %s", res.URLs["web"], code, body)
	}

	// The namespace: managed, labelled, expiring; the policies; one sidecar.
	nsObj, err := f.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{LabelManaged: "true", LabelEnvironment: "shop-test", LabelRepository: "acme.shop", LabelPullRequest: "17"} {
		if nsObj.Labels[k] != want {
			t.Errorf("namespace label %s=%q, want %q", k, nsObj.Labels[k], want)
		}
	}
	if nsObj.Annotations[AnnotationRepository] != "acme/shop" || nsObj.Labels[LabelExpires] == "" || nsObj.Annotations[AnnotationProbe] == "" {
		t.Errorf("namespace annotations/labels: %v %v", nsObj.Annotations, nsObj.Labels)
	}
	pols, err := f.kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pols.Items {
		names = append(names, p.Name)
		for _, rule := range p.Spec.Ingress {
			for _, peer := range rule.From {
				// Only the ingress controller comes from another namespace, and only its pods.
				if peer.NamespaceSelector != nil && (p.Name != PolicyIngressCtl || peer.PodSelector == nil || len(peer.PodSelector.MatchLabels) == 0) {
					t.Errorf("policy %s admits by namespace selector: %+v", p.Name, peer)
				}
			}
		}
	}
	if got := joinSorted(names); got != "af-deny-all, af-ingress-controller, af-services, af-sidecar-egress, af-sidecar-ingress" {
		t.Errorf("policies: %s", got)
	}
	sc, err := f.kube.AppsV1().Deployments(ns).Get(ctx, SidecarName, metav1.GetOptions{})
	if err != nil || *sc.Spec.Replicas != 1 {
		t.Fatalf("sidecar deployment: %v", err)
	}

	// No pod has a service-account token.
	pods, err := f.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) < 4 {
		t.Errorf("only %d pods", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken {
			t.Errorf("pod %s: automountServiceAccountToken not false", p.Name)
		}
		for _, v := range p.Spec.Volumes {
			if v.Projected != nil {
				t.Errorf("pod %s has a projected volume %s (a token?)", p.Name, v.Name)
			}
		}
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			for _, m := range c.VolumeMounts {
				if strings.Contains(m.MountPath, "serviceaccount") {
					t.Errorf("pod %s container %s mounts %s", p.Name, c.Name, m.MountPath)
				}
			}
		}
	}

	// A second environment, to be unreachable from the first.
	// Its "page" answers 404 at / and 200 at its health path: published, it is ready by the
	// health path.
	other := small(t, map[string]*manifest.Service{
		"echo": {Kind: "worker", Port: 8080, Command: manifest.Command{Exec: []string{"aftool", "serve", "-tcp", ":8080", "-udp", ""}}},
		"page": {Port: 8080, HealthPath: "/healthz", Command: manifest.Command{Shell: "mkdir -p /tmp/www && echo ok > /tmp/www/healthz && busybox httpd -f -p 8080 -h /tmp/www & trap 'kill $!; exit 0' TERM; wait"}},
	})
	other.Runtime.Domain = "preview.af.test"
	otherRef := afruntime.Ref{ID: "shop-test-other", Manifest: other}
	down(t, rt, otherRef)
	otherRes, err := rt.Up(ctx, afruntime.Spec{Ref: otherRef})
	if err != nil {
		t.Fatalf("second environment: %v", err)
	}
	pageURL := otherRes.URLs["page"]
	if code, _ := f.viaIngress(t, pageURL); code != 404 {
		t.Errorf("GET %s: %d, want the 404 the health path was needed for", pageURL, code)
	}
	if code, body := f.viaIngress(t, pageURL+"healthz"); code != 200 || body != "ok\n" {
		t.Errorf("GET %shealthz: %d %q", pageURL, code, body)
	}
	otherNS := "af-env-shop-test-other"
	otherSvc, err := f.kube.CoreV1().Services(otherNS).Get(ctx, "echo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	otherPods, err := f.kube.CoreV1().Pods(otherNS).List(ctx, metav1.ListOptions{LabelSelector: LabelService + "=echo"})
	if err != nil || len(otherPods.Items) == 0 {
		t.Fatalf("other pods: %v", err)
	}
	otherIP := otherPods.Items[0].Status.PodIP
	// Positive control: inside its own environment the echo service answers.
	ctl := parseResults(f.inPod(t, otherNS, "echo", "control", checkScript([][2]string{
		{"own-service", "aftool tcp -timeout 3s echo:8080"},
	})))
	if ctl["own-service"].rc != "0" {
		t.Fatalf("positive control: the second environment's service does not answer its own pods: %+v", ctl)
	}

	in := f.h.Internet
	log := f.inPod(t, ns, "web", "containment", checkScript([][2]string{
		{"resolve-worker", "aftool dns worker"},
		{"call-worker", "aftool http -timeout 5s http://worker:8080/work"},
		{"direct-tcp", "aftool tcp -timeout 3s " + in.PublicTCP},
		{"direct-udp-dns", "aftool dns -timeout 3s -server " + in.Resolver + " " + in.PublicHost},
		{"metadata", "aftool http -timeout 3s http://" + in.Metadata + "/"},
		{"apiserver-direct", "aftool connect -timeout 3s " + f.h.APIServerIP + ":6443"},
		{"apiserver-service", "aftool connect -timeout 3s $KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"},
		{"allowed-transparent", "aftool http -timeout 5s http://" + in.AllowedAPIHost + "/"},
		{"blocked-transparent", "aftool http -timeout 5s http://" + in.BlockedAPIHost + "/"},
		{"allowed-proxy", viaProxy(in.AllowedAPIHost)},
		{"blocked-proxy", viaProxy(in.BlockedAPIHost)},
		{"other-env-service", "aftool tcp -timeout 3s " + otherSvc.Spec.ClusterIP + ":8080"},
		{"other-env-pod", "aftool tcp -timeout 3s " + otherIP + ":8080"},
		{"token", "ls /var/run/secrets/kubernetes.io/serviceaccount/token"},
	}))
	r := parseResults(log)
	t.Logf("from inside a web pod:\n%s", log)
	mustWork := map[string]string{"resolve-worker": "", "call-worker": "200", "allowed-transparent": "200", "allowed-proxy": "HTTP/1.1 200"}
	for name, prefix := range mustWork {
		if r[name].rc != "0" || !strings.HasPrefix(r[name].out, prefix) {
			t.Errorf("%s should work: %+v", name, r[name])
		}
	}
	for _, name := range []string{"direct-tcp", "direct-udp-dns", "metadata", "apiserver-direct", "apiserver-service", "other-env-service", "other-env-pod", "token"} {
		if c, ok := r[name]; !ok || c.rc == "0" {
			t.Errorf("%s should fail: %+v", name, c)
		}
	}
	if t.Failed() {
		sc, _ := f.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelRole + "=" + RoleSidecar})
		for _, p := range sc.Items {
			raw, _ := f.kube.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			t.Logf("sidecar %s log:\n%s", p.Name, failure.LastLines(string(raw), 40))
		}
	}
	if c := r["blocked-transparent"]; !strings.HasPrefix(c.out, "403 af sidecar: blocked") {
		t.Errorf("blocked host through the transparent port: %+v", c)
	}
	if c := r["blocked-proxy"]; !strings.HasPrefix(c.out, "HTTP/1.1 403") {
		t.Errorf("blocked host through the explicit proxy: %+v", c)
	}

	// What the sidecar decided, read through a port-forward to its control port: the blocked
	// and the allowed host, each with its rule. Closing the link leaves no listener.
	link, err := rt.Sidecar(ctx, ref)
	if err != nil {
		t.Fatalf("the sidecar's link: %v", err)
	}
	entries, _, err := (&control.Client{Addr: link.Addr}).Log(ctx, control.LogQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var sawBlocked, sawAllowed bool
	for _, e := range entries {
		sawBlocked = sawBlocked || e.Host == in.BlockedAPIHost && !e.Allowed && e.Rule != "" && e.Status == 403
		sawAllowed = sawAllowed || e.Host == in.AllowedAPIHost && e.Allowed && e.Rule != ""
	}
	if !sawBlocked || !sawAllowed {
		t.Errorf("the decision log through %s lacks the blocked (%v) or the allowed (%v) host: %+v", link.Via, sawBlocked, sawAllowed, entries)
	}
	if err := link.Close(); err != nil {
		t.Errorf("closing the link: %v", err)
	}
	if c, err := net.DialTimeout("tcp", link.Addr, time.Second); err == nil {
		c.Close()
		t.Errorf("the port-forward still listens on %s after Close", link.Addr)
	}
	// An identity without pods/portforward is refused by name before anything else is tried
	// (it may not even read namespaces: a refusal of that would be AF-RUN-002).
	if out, err := f.h.Kubectl(ctx, "", "-n", "default", "create", "serviceaccount", "af-no-forward"); err != nil && !strings.Contains(out+err.Error(), "already exists") {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = f.h.Kubectl(context.Background(), "", "-n", "default", "delete", "serviceaccount", "af-no-forward")
	})
	kc, err := f.h.KubeconfigAs(ctx, "default", "af-no-forward", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Kubeconfig: kc}).Sidecar(ctx, ref); failure.As(err) == nil || failure.As(err).Entry != failure.ForwardRefused {
		t.Errorf("without pods/portforward: %v, want AF-RUN-053", err)
	}

	// Idempotence: a second up converges without replacing anything.
	uids := func() map[string]string {
		out := map[string]string{}
		ds, _ := f.kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		for _, d := range ds.Items {
			out["deploy/"+d.Name] = string(d.UID) + fmt.Sprint(d.Generation)
		}
		ss, _ := f.kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		for _, s := range ss.Items {
			out["svc/"+s.Name] = string(s.UID)
		}
		js, _ := f.kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		for _, j := range js.Items {
			out["job/"+j.Name] = string(j.UID)
		}
		ps, _ := f.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelWorkload + "=" + WorkloadService})
		for _, p := range ps.Items {
			out["pod/"+p.Name] = string(p.UID)
		}
		return out
	}
	before := uids()
	start = time.Now()
	if _, err := rt.Up(ctx, afruntime.Spec{Ref: ref, PullRequest: 17, Images: f.images()}); err != nil {
		t.Fatalf("second af up: %v", err)
	}
	t.Logf("second af up (converge): %s", time.Since(start).Round(time.Millisecond))
	after := uids()
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("second up changed objects:\nbefore %v\nafter  %v", before, after)
	}

	// Status reads the size off the running pods.
	st, err := rt.Status(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if st.Probe == nil || st.Probe.Verdict != gate.Contained {
		t.Errorf("status probe: %+v", st.Probe)
	}
	// The watch: the probe stayed and its last check (the second up's first) was contained.
	if w := st.Watch; w == nil || w.State != gate.Contained || w.At == nil || w.EverySeconds != DefaultWatch.Seconds() {
		t.Errorf("status watch: %+v", w)
	}
	got := fmt.Sprint(st.Services)
	for _, s := range st.Services {
		if s.State != afruntime.StateRunning || s.Ready != s.Desired || s.CPU != "100m" || s.Memory != "64Mi" {
			t.Errorf("status: %s", got)
		}
	}
	if len(st.Services) != 2 {
		t.Errorf("status services: %s", got)
	}

	// The inventory attributes what af made to the environment.
	inv, err := rt.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, r := range inv {
		if r.Environment == "shop-test" {
			have[r.Kind+"/"+r.Name] = true
		}
	}
	for _, want := range []string{"Namespace/af-env-shop-test", "Deployment/web", "Deployment/worker", "Deployment/af-sidecar", "Service/af-sidecar",
		"Secret/af-sidecar-config", "NetworkPolicy/af-deny-all", "Ingress/web", "Job/" + firstJob(t, f, ns)} {
		if !have[want] {
			t.Errorf("inventory lacks %s: %v", want, have)
		}
	}
	if !have["Pod/"+ProbeName] {
		t.Errorf("inventory lacks the probe pod, which stays after a contained up as the watch: %v", have)
	}

	// Down, timed.
	start = time.Now()
	if err := rt.Down(ctx, ref); err != nil {
		t.Fatal(err)
	}
	t.Logf("af down of the example: %s", time.Since(start).Round(time.Millisecond))
	if _, err := f.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace still there after down: %v", err)
	}
	inv, err = rt.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range inv {
		if r.Environment == "shop-test" {
			t.Errorf("inventory after down still has %+v", r)
		}
	}
}

// TestHoldsOrderTheStart: every pod is written beside the probe, and the holds alone order
// the applications' start: a service whose dependency takes seconds to listen, and whose
// migration takes seconds to run, starts after both, though its pods were there (and gated)
// long before; a replacement starts at once (its hold is released); and a second af up that
// changes the service closes the hold again, so its new pod waits for the new migration.
func TestHoldsOrderTheStart(t *testing.T) {
	besideOthers(t)
	f := setup(t)
	requireEnforcer(t, f.h)
	ctx := ctxFor(t, 10*time.Minute)
	manifestWith := func(note string) *manifest.Manifest {
		return small(t, map[string]*manifest.Service{
			"dep": {Port: 8080, Command: manifest.Command{Shell: "sleep 3; exec aftool serve -tcp :8080 -udp ''"}},
			"app": {Port: 8080, DependsOn: []string{"dep"}, Env: map[string]string{"NOTE": note},
				Command: manifest.Command{Shell: "echo started $NOTE; exec aftool serve -tcp :8080 -udp ''"},
				Migrate: manifest.Command{Shell: "sleep 2; echo migrated $NOTE"}},
		})
	}
	ref := afruntime.Ref{ID: "holds-test", Manifest: manifestWith("one")}
	said := &progressTimes{}
	rt := f.runtime(t, said.record)
	down(t, rt, ref)
	if _, err := rt.Up(ctx, afruntime.Spec{Ref: ref}); err != nil {
		t.Fatalf("af up: %v", err)
	}
	ns := "af-env-holds-test"
	list := func() []corev1.Pod {
		pods, err := f.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelWorkload + " in (" + WorkloadService + "," + WorkloadMigration + ")"})
		if err != nil {
			t.Fatal(err)
		}
		return pods.Items
	}
	first := list()
	for _, p := range first {
		if p.Labels[LabelService] == "app" && p.Labels[LabelWorkload] == WorkloadService && p.CreationTimestamp.Time.After(said.first(t, "probe: contained")) {
			t.Errorf("app's pod %s was created at %s, after the probe: it was not written beside it", p.Name, p.CreationTimestamp)
		}
	}
	if n := releasedInOrder(t, f, ns, said, first, map[string][]string{"app": {"dep: 1/1 ready", "migration of app: succeeded"}}); n != 3 {
		t.Errorf("%d pods released, want the migration, dep and app", n)
	}

	// A replacement: the hold stays released, so only its gate stands before it.
	var old string
	for _, p := range first {
		if p.Labels[LabelService] == "app" && p.Labels[LabelWorkload] == WorkloadService {
			old = p.Name
		}
	}
	if err := f.kube.CoreV1().Pods(ns).Delete(ctx, old, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	replacement := waitNewPod(t, f, ns, "app", map[string]bool{old: true})
	rel := lineWith(podLines(t, f, ns, replacement, GateContainer), "released after")
	var waited float64
	if rel == nil {
		t.Errorf("the replacement %s's gate never waited at its hold", replacement)
	} else if _, err := fmt.Sscanf(rel.text[strings.Index(rel.text, "released after"):], "released after %f ms", &waited); err != nil || waited > 500 {
		t.Errorf("the replacement %s was held: %q", replacement, rel.text)
	}

	// Converge with a change: the hold closes again, and the new pod waits for the new
	// migration.
	before := map[string]bool{}
	for _, p := range list() {
		before[p.Name] = true
	}
	said2 := &progressTimes{}
	ref.Manifest = manifestWith("two")
	if _, err := f.runtime(t, said2.record).Up(ctx, afruntime.Spec{Ref: ref}); err != nil {
		t.Fatalf("second af up: %v", err)
	}
	var fresh []corev1.Pod
	for _, p := range list() {
		if !before[p.Name] && p.DeletionTimestamp == nil {
			fresh = append(fresh, p)
		}
	}
	if n := releasedInOrder(t, f, ns, said2, fresh, map[string][]string{"app": {"migration of app: succeeded"}}); n != 2 {
		t.Errorf("second af up: %d new pods released, want the new migration and app", n)
	}
	for _, p := range fresh {
		if p.Labels[LabelWorkload] == WorkloadService {
			if lines := podLines(t, f, ns, p.Name, "app"); len(lines) == 0 || lines[0].text != "started two" {
				t.Errorf("the new app pod says %v", lines)
			}
		}
	}
}

// waitNewPod waits for a ready instance of the service that is none of the pods named, and
// returns its name.
func waitNewPod(t *testing.T, f *fixture, ns, service string, not map[string]bool) string {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		pods, err := f.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: labels.SelectorFromSet(instanceSelector(service)).String()})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if not[p.Name] || p.DeletionTimestamp != nil {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					return p.Name
				}
			}
		}
	}
	t.Fatalf("no new ready instance of %s within 2 minutes", service)
	return ""
}

// releasedInOrder checks, from the gates' own logs (the node's times, to the nanosecond), that
// every pod given waited at its hold and was released after af read the probe's verdict; a
// service's instances after every line af said that after names for it (a dependency ready,
// its migration succeeded); and that a service's first line comes after its migration's
// last. It returns how many pods were released.
func releasedInOrder(t *testing.T, f *fixture, ns string, said *progressTimes, pods []corev1.Pod, after map[string][]string) int {
	t.Helper()
	contained := said.first(t, "probe: contained")
	migrationEnd := map[string]time.Time{}
	for _, p := range pods {
		if p.Labels[LabelWorkload] == WorkloadMigration {
			if lines := podLines(t, f, ns, p.Name, p.Labels[LabelService]); len(lines) > 0 {
				migrationEnd[p.Labels[LabelService]] = lines[len(lines)-1].at
			}
		}
	}
	released := 0
	for _, p := range pods {
		rel := lineWith(podLines(t, f, ns, p.Name, GateContainer), "released after")
		if rel == nil {
			t.Errorf("pod %s: its gate never waited at a hold", p.Name)
			continue
		}
		released++
		if !rel.at.After(contained) {
			t.Errorf("pod %s was released at %s, before af read the probe's verdict at %s", p.Name, rel.at.Format(time.StampMicro), contained.Format(time.StampMicro))
		}
		service := p.Labels[LabelService]
		if p.Labels[LabelWorkload] != WorkloadService {
			continue
		}
		for _, line := range after[service] {
			if at := said.first(t, line); !rel.at.After(at) {
				t.Errorf("pod %s was released at %s, before af said %q at %s", p.Name, rel.at.Format(time.StampMicro), line, at.Format(time.StampMicro))
			}
		}
		if end, ok := migrationEnd[service]; ok {
			if first := podLines(t, f, ns, p.Name, service); len(first) == 0 || !first[0].at.After(end) {
				t.Errorf("pod %s's first line (%v) is not after its migration's last (%s)", p.Name, first, end.Format(time.StampMicro))
			}
		}
	}
	return released
}

// progressTimes records when each progress line of af up was said.
type progressTimes struct {
	mu    sync.Mutex
	lines []timedLine
}

// record is an Options modifier: progress lines are logged and timed.
func (p *progressTimes) record(o *Options) {
	logf := o.Progress
	o.Progress = func(format string, args ...any) {
		p.mu.Lock()
		p.lines = append(p.lines, timedLine{at: time.Now(), text: fmt.Sprintf(format, args...)})
		p.mu.Unlock()
		logf(format, args...)
	}
}

// first returns when a line holding s was first said.
func (p *progressTimes) first(t *testing.T, s string) time.Time {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := lineWith(p.lines, s); l != nil {
		return l.at
	}
	t.Fatalf("af never said %q", s)
	return time.Time{}
}

// timedLine is one line of a log with its time.
type timedLine struct {
	at   time.Time
	text string
}

func (l timedLine) String() string { return l.at.Format(time.StampMicro) + " " + l.text }

func lineWith(lines []timedLine, s string) *timedLine {
	for i := range lines {
		if strings.Contains(lines[i].text, s) {
			return &lines[i]
		}
	}
	return nil
}

// podLines reads a container's log with the times the node wrote each line.
func podLines(t *testing.T, f *fixture, ns, pod, container string) []timedLine {
	t.Helper()
	data, err := f.kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Timestamps: true}).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("logs of %s/%s: %v", pod, container, err)
	}
	var out []timedLine
	for _, l := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		ts, text, ok := strings.Cut(l, " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if !ok || err != nil {
			continue
		}
		out = append(out, timedLine{at: at, text: text})
	}
	return out
}

func firstJob(t *testing.T, f *fixture, ns string) string {
	t.Helper()
	jobs, err := f.kube.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(jobs.Items) != 1 {
		t.Fatalf("jobs: %v", err)
	}
	return jobs.Items[0].Name
}

// TestReplicasAndResources: replicas become instances, all ready before up returns; sizes
// become equal requests and limits (Guaranteed), a dimension not named is in neither map af
// sends, and the namespace's limit range gives it the ceiling (limits, default 1 CPU and 1Gi)
// as its limit and a small request (10m, 16Mi). "memory" is at the manifest's floor (16Mi): its
// gate, the af binary, runs within that size before the application.
func TestReplicasAndResources(t *testing.T) {
	f := setup(t)
	requireEnforcer(t, f.h)
	ctx := ctxFor(t, 10*time.Minute)
	rt := f.runtime(t)
	serve := manifest.Command{Exec: []string{"aftool", "serve", "-tcp", ":8080", "-udp", ""}}
	m := small(t, map[string]*manifest.Service{
		"sized":  {Port: 8080, Replicas: 3, Command: serve, Resources: &manifest.Resources{CPU: "50m", Memory: "32Mi"}},
		"memory": {Port: 8080, Command: serve, Resources: &manifest.Resources{Memory: "16Mi"}},
		"plain":  {Port: 8080, Command: serve},
	})
	// A database by URL: the Secret af-database, which every instance's DATABASE_URL names (a
	// pod whose Secret is missing never starts, so the pods ready below read it).
	const dbURL = "postgres://preview@db.af.test/sizes"
	m.Database = &manifest.Database{Provider: "url", URLFrom: "AF_TEST_DATABASE_URL", EnvName: "DATABASE_URL"}
	getenv := func(k string) string { return map[string]string{"AF_TEST_DATABASE_URL": dbURL}[k] }
	ref := afruntime.Ref{ID: "sizes-test", Manifest: m}
	down(t, rt, ref)
	defer func() {
		// No domain: no Ingress and no URL.
		ings, err := f.kube.NetworkingV1().Ingresses("af-env-sizes-test").List(context.Background(), metav1.ListOptions{})
		if err != nil || len(ings.Items) != 0 {
			t.Errorf("ingresses without a domain: %v %d", err, len(ings.Items))
		}
	}()
	// Interrupted part way (during the probe or the services): AF-RUN-007, and the next up
	// converges from what the first one left.
	short, cancel := context.WithTimeout(ctx, 4*time.Second)
	_, err := rt.Up(short, afruntime.Spec{Ref: ref, Getenv: getenv})
	cancel()
	if failure.CodeOf(err) != failure.Interrupted.Code {
		t.Fatalf("up cancelled after 4s: want AF-RUN-007, got %v", err)
	}
	sizesRes, err := rt.Up(ctx, afruntime.Spec{Ref: ref, Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	if sec, err := f.kube.CoreV1().Secrets("af-env-sizes-test").Get(ctx, DatabaseSecret, metav1.GetOptions{}); err != nil || string(sec.Data["url"]) != dbURL {
		t.Errorf("the database Secret: %v", err)
	}
	if len(sizesRes.URLs) != 0 {
		t.Errorf("URLs without a domain: %v", sizesRes.URLs)
	}
	ns := "af-env-sizes-test"
	d, err := f.kube.AppsV1().Deployments(ns).Get(ctx, "sized", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Status.ReadyReplicas != 3 {
		t.Errorf("up returned with %d of 3 ready", d.Status.ReadyReplicas)
	}
	pods, err := f.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelService + "=sized," + LabelWorkload + "=" + WorkloadService})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 3 {
		t.Errorf("%d pods, want 3", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Status.QOSClass != corev1.PodQOSGuaranteed {
			t.Errorf("pod %s QoS %s", p.Name, p.Status.QOSClass)
		}
	}
	for name, want := range map[string]string{"memory": "limits=[memory=16Mi] requests=[memory=16Mi]", "plain": "limits=[] requests=[]"} {
		d, err := f.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		app := d.Spec.Template.Spec.Containers[0]
		if !slices.ContainsFunc(app.Env, func(e corev1.EnvVar) bool {
			return e.Name == "DATABASE_URL" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == DatabaseSecret
		}) {
			t.Errorf("%s/%s: no DATABASE_URL from %s in %v", name, app.Name, DatabaseSecret, app.Env)
		}
		for _, c := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
			r := c.Resources
			if got := fmt.Sprintf("limits=%s requests=%s", rl(r.Limits), rl(r.Requests)); got != want {
				t.Errorf("%s/%s: %s, want %s", name, c.Name, got, want)
			}
		}
	}
	// What runs: the limit range fills in what af did not send, the gate as the application.
	for name, want := range map[string]string{
		"sized":  "limits=[cpu=50m memory=32Mi] requests=[cpu=50m memory=32Mi]",
		"memory": "limits=[cpu=1 memory=16Mi] requests=[cpu=10m memory=16Mi]",
		"plain":  "limits=[cpu=1 memory=1Gi] requests=[cpu=10m memory=16Mi]",
	} {
		pods, err := f.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelService + "=" + name + "," + LabelWorkload + "=" + WorkloadService})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("pods of %s: %v", name, err)
		}
		for _, p := range pods.Items {
			for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
				r := c.Resources
				if got := fmt.Sprintf("limits=%s requests=%s", rl(r.Limits), rl(r.Requests)); got != want {
					t.Errorf("pod %s/%s: %s, want %s", p.Name, c.Name, got, want)
				}
			}
		}
	}
	st, err := rt.Status(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"sized": "3/3 50m 32Mi", "memory": "1/1 1 16Mi", "plain": "1/1 1 1Gi"}
	for _, s := range st.Services {
		if got := fmt.Sprintf("%d/%d %s %s", s.Ready, s.Desired, s.CPU, s.Memory); got != want[s.Name] {
			t.Errorf("status %s: %q, want %q", s.Name, got, want[s.Name])
		}
	}
}

// TestFailingMigration: the migration fails, its exit code and output are reported, the Job
// ran once, and the service it belongs to was never created.
func TestFailingMigration(t *testing.T) {
	besideOthers(t)
	f := setup(t)
	requireEnforcer(t, f.h)
	ctx := ctxFor(t, 10*time.Minute)
	rt := f.runtime(t)
	m := small(t, map[string]*manifest.Service{
		"app": {Port: 8080, Command: manifest.Command{Exec: []string{"aftool", "serve"}},
			Migrate: manifest.Command{Exec: []string{"sh", "-c", "echo migrating; echo the schema is broken; exit 7"}}},
	})
	ref := afruntime.Ref{ID: "migrate-test", Manifest: m}
	down(t, rt, ref)
	_, err := rt.Up(ctx, afruntime.Spec{Ref: ref})
	if failure.CodeOf(err) != failure.MigrationFailed.Code || !strings.Contains(err.Error(), "exited with code 7") || !strings.Contains(err.Error(), "the schema is broken") {
		t.Fatalf("want AF-RUN-006 with exit code 7 and the output, got %v", err)
	}
	ns := "af-env-migrate-test"
	// af logs --migration: the migration's own output; --gate: what its gate checked first.
	var mlog, glog strings.Builder
	if err := rt.Logs(ctx, ref, afruntime.LogOptions{Service: "app", Migration: true}, &mlog); err != nil || !strings.Contains(mlog.String(), "| the schema is broken") {
		t.Errorf("af logs --migration: %v\n%s", err, mlog.String())
	}
	if err := rt.Logs(ctx, ref, afruntime.LogOptions{Service: "app", Migration: true, Gate: true}, &glog); err != nil || !strings.Contains(glog.String(), "outcome=denied") {
		t.Errorf("af logs --migration --gate: %v\n%s", err, glog.String())
	}
	if err := rt.Logs(ctx, ref, afruntime.LogOptions{Service: "nope"}, io.Discard); failure.As(err) == nil || failure.As(err).Entry != failure.UsageInvalid {
		t.Errorf("af logs of a service the manifest lacks: %v", err)
	}
	// The service's pods were written beside the probe; after the failed migration its hold
	// stays closed and none of them has started its application.
	hold, err := f.kube.CoreV1().Services(ns).Get(ctx, serviceHold("app"), metav1.GetOptions{})
	if err != nil || hold.Spec.Selector[LabelHold] == "" {
		t.Errorf("the service's hold after a failed migration: %v %v", err, hold)
	}
	appPods, err := f.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelService + "=app," + LabelWorkload + "=" + WorkloadService})
	if err != nil {
		t.Fatal(err)
	}
	if len(appPods.Items) == 0 {
		t.Errorf("no pod of the service was written")
	}
	for i := range appPods.Items {
		if appStarted(&appPods.Items[i]) {
			t.Errorf("pod %s started its application after a failed migration", appPods.Items[i].Name)
		}
	}
	// af reads the end off the migration's pod; the job controller records it a moment later.
	var j batchv1.Job
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		jobs, err := f.kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(jobs.Items) != 1 {
			t.Fatalf("jobs: %v %d", err, len(jobs.Items))
		}
		if j = jobs.Items[0]; j.Status.Failed > 0 || time.Now().After(deadline) {
			break
		}
	}
	pods, err := f.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + j.Name})
	if err != nil {
		t.Fatal(err)
	}
	if *j.Spec.BackoffLimit != 0 || j.Status.Failed != 1 || len(pods.Items) != 1 {
		t.Errorf("job: backoffLimit %d, failed %d, %d pods: it must run exactly once", *j.Spec.BackoffLimit, j.Status.Failed, len(pods.Items))
	}
	if len(j.Spec.Template.Spec.InitContainers) != 1 || j.Spec.Template.Spec.InitContainers[0].Name != GateContainer {
		t.Errorf("the migration is not gated")
	}
}

// TestUnlabelledNamespaceIsRefused: a namespace with the environment's name that af did not
// make is refused by up and down, and it and its contents stay as they were.
func TestUnlabelledNamespaceIsRefused(t *testing.T) {
	besideOthers(t)
	f := setup(t)
	ctx := ctxFor(t, 5*time.Minute)
	rt := f.runtime(t)
	ns := "af-env-not-ours"
	if _, err := f.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	cm, err := f.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "precious"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := f.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	ref := afruntime.Ref{ID: "not-ours", Manifest: small(t, map[string]*manifest.Service{"s": {}})}
	if _, err := rt.Up(ctx, afruntime.Spec{Ref: ref}); failure.CodeOf(err) != failure.NamespaceNotOurs.Code {
		t.Errorf("up: want AF-RUN-045, got %v", err)
	}
	if err := rt.Down(ctx, ref); failure.CodeOf(err) != failure.NamespaceNotOurs.Code {
		t.Errorf("down: want AF-RUN-045, got %v", err)
	}
	after, err := f.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil || after.ResourceVersion != before.ResourceVersion || after.DeletionTimestamp != nil {
		t.Errorf("namespace changed: %v", err)
	}
	cm2, err := f.kube.CoreV1().ConfigMaps(ns).Get(ctx, "precious", metav1.GetOptions{})
	if err != nil || cm2.ResourceVersion != cm.ResourceVersion {
		t.Errorf("configmap changed: %v", err)
	}
	pols, _ := f.kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	secrets, _ := f.kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelManagedBy + "=af"})
	if len(pols.Items) != 0 || len(secrets.Items) != 0 {
		t.Errorf("af wrote into a namespace it does not own: %d policies, %d secrets", len(pols.Items), len(secrets.Items))
	}

	// Another repository's environment with the same id is refused too.
	mine := afruntime.Ref{ID: "repo-test", Manifest: small(t, map[string]*manifest.Service{"s": {Command: manifest.Command{Exec: []string{"aftool", "serve"}}}}), Repository: "acme/one"}
	down(t, rt, mine)
	if _, err := rt.Up(ctx, afruntime.Spec{Ref: mine}); err != nil {
		t.Fatal(err)
	}
	theirs := mine
	theirs.Repository = "other/one"
	if _, err := rt.Up(ctx, afruntime.Spec{Ref: theirs}); failure.CodeOf(err) != failure.NamespaceNotOurs.Code {
		t.Errorf("up of another repository's environment: want AF-RUN-045, got %v", err)
	}
	if err := rt.Down(ctx, theirs); failure.CodeOf(err) != failure.NamespaceNotOurs.Code {
		t.Errorf("down of another repository's environment: want AF-RUN-045, got %v", err)
	}
}

// TestDownNamesTheFinalizer: a namespace held by a finalizer makes down fail naming it, up
// refuses the terminating namespace, and once the finalizer goes down succeeds. Down of an
// environment that never existed succeeds.
func TestDownNamesTheFinalizer(t *testing.T) {
	besideOthers(t)
	f := setup(t)
	ctx := ctxFor(t, 5*time.Minute)
	rt := f.runtime(t, func(o *Options) { o.DownTimeout = 8 * time.Second })
	if err := rt.Down(ctx, afruntime.Ref{ID: "never-up", Manifest: small(t, map[string]*manifest.Service{"s": {}})}); err != nil {
		t.Fatalf("down of an environment never up: %v", err)
	}
	ns := "af-env-held"
	if _, err := f.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{LabelManaged: "true"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"af.test/hold"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	release := func() {
		_, _ = f.kube.CoreV1().ConfigMaps(ns).Patch(context.Background(), "held", "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	}
	t.Cleanup(release)
	ref := afruntime.Ref{ID: "held", Manifest: small(t, map[string]*manifest.Service{"s": {}})}
	err := rt.Down(ctx, ref)
	if failure.CodeOf(err) != failure.TeardownIncomplete.Code || !strings.Contains(err.Error(), "af.test/hold") {
		t.Fatalf("down of a held namespace: want AF-RUN-030 naming af.test/hold, got %v", err)
	}
	if _, err := rt.Up(ctx, afruntime.Spec{Ref: ref}); failure.CodeOf(err) != failure.StillTerminating.Code {
		t.Errorf("up of a terminating namespace: want AF-RUN-031, got %v", err)
	}
	release()
	rt = f.runtime(t)
	if err := rt.Down(ctx, ref); err != nil {
		t.Fatalf("down after the finalizer went: %v", err)
	}
}

// TestUpRefusedWithoutEnforcer is the negative control: on the cluster started without a
// NetworkPolicy enforcer the probe gets out, af up fails with AF-RUN-043 naming the routes, no
// application container of any service or migration pod ever starts (their pods are written
// beside the probe and wait at their gates and holds), the probe pod is gone, and af down
// removes the namespace.
func TestUpRefusedWithoutEnforcer(t *testing.T) {
	f := setup(t)
	// The negative control's cause, read off the machine: no enforcer at all.
	f.h.RequireState(t, testcluster.StateNoEnforcer)
	ctx := ctxFor(t, 10*time.Minute)
	rt := f.runtime(t)
	ref := afruntime.Ref{ID: "shop-uncontained", Manifest: shop(t)}
	down(t, rt, ref)
	events := watchPods(t, f.kube, ref.ID)
	res, err := rt.Up(ctx, afruntime.Spec{Ref: ref, Images: f.images()})
	seen := events()
	if failure.CodeOf(err) != failure.NotContained.Code {
		t.Fatalf("want AF-RUN-043, got %v", err)
	}
	for _, route := range []string{gate.RouteTCP, gate.RouteDNS, gate.RouteMetadata} {
		if !strings.Contains(err.Error(), route) {
			t.Errorf("the error does not name route %s: %v", route, err)
		}
	}
	if res == nil || res.Probe == nil || res.Probe.Verdict != gate.Escape {
		t.Errorf("the verdict is not returned: %+v", res)
	}
	noApplicationStarted(t, seen)
	ns := "af-env-shop-uncontained"
	if _, err := f.kube.CoreV1().Pods(ns).Get(ctx, ProbeName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the probe pod was left: %v", err)
	}
	if pols, _ := f.kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{}); len(pols.Items) == 0 {
		t.Errorf("the policies were removed; they must stay for af down")
	}
	if err := rt.Down(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if _, err := f.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace still there after down: %v", err)
	}
}

// noApplicationStarted fails the test when any service or migration pod was seen with an
// application container started, and checks that such pods were there to be seen (written
// beside the probe, so the control covers them).
func noApplicationStarted(t *testing.T, seen []podEvent) {
	t.Helper()
	pods := 0
	for _, e := range seen {
		if e.workload != WorkloadService && e.workload != WorkloadMigration {
			continue
		}
		if e.kind == watch.Added {
			pods++
		}
		if e.started {
			t.Errorf("an application container of pod %s started", e.name)
		}
	}
	if pods == 0 {
		t.Errorf("no service or migration pod was seen: the workloads are written beside the probe, and this control must cover them")
	}
}

// viaProxy asks the explicit proxy named by HTTP_PROXY (an address, as af sets it) for
// http://host/ and prints the status line. (Busybox's wget is not used: statically linked, it
// crashes resolving names.) The request's stdin stays open: nc would otherwise half-close the
// connection at once, which Go's HTTP server takes for a client that went away.
func viaProxy(host string) string { return viaProxyWith(host, "") }

// viaProxyWith is viaProxy sending one more header line ("Name: value"), when given.
func viaProxyWith(host, header string) string {
	extra := ""
	if header != "" {
		extra = header + `\r\n`
	}
	return `p=${HTTP_PROXY#http://}; (printf 'GET http://` + host + `/ HTTP/1.1\r\nHost: ` + host + `\r\n` + extra + `Connection: close\r\n\r\n'; sleep 3) | nc -w 5 ${p%:*} ${p##*:} | tr -d '\r' | sed -n '1p;$p'`
}

// TestNotReadyReasons: a service that crashes fails af up with AF-RUN-005 and its exit code;
// one whose image cannot be pulled, or whose health path answers 404, times out with AF-RUN-004
// saying which; af status shows the crash's exit code.
func TestNotReadyReasons(t *testing.T) {
	besideOthers(t)
	f := setup(t)
	requireEnforcer(t, f.h)
	ctx := ctxFor(t, 10*time.Minute)
	rt := f.runtime(t, func(o *Options) { o.ReadyTimeout = 25 * time.Second })
	for _, c := range []struct {
		id   string
		svc  *manifest.Service
		code failure.Code
		want string
	}{
		{"crash-test", &manifest.Service{Port: 8080, Command: manifest.Command{Exec: []string{"sh", "-c", "echo about to fail; exit 3"}}},
			failure.ExitedDuringStart.Code, "exited with code 3"},
		{"pull-test", &manifest.Service{Port: 8080, Image: "af.local/does-not-exist:1"},
			failure.NotReady.Code, "cannot be pulled"},
		{"health-test", &manifest.Service{Port: 8080, HealthPath: "/healthz", Command: manifest.Command{Exec: []string{"busybox", "httpd", "-f", "-p", "8080", "-h", "/"}}},
			failure.NotReady.Code, "readiness check does not pass"},
	} {
		t.Run(c.id, func(t *testing.T) {
			t.Parallel()
			ref := afruntime.Ref{ID: c.id, Manifest: small(t, map[string]*manifest.Service{"svc": c.svc})}
			down(t, rt, ref)
			_, err := rt.Up(ctx, afruntime.Spec{Ref: ref})
			if failure.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want %s saying %q, got %v", c.code, c.want, err)
			}
			t.Logf("af up: %v", err)
			if c.id == "crash-test" {
				st, err := rt.Status(ctx, ref)
				if err != nil || len(st.Services) != 1 || st.Services[0].ExitCode == nil || *st.Services[0].ExitCode != 3 || st.Services[0].State != afruntime.StateFailed {
					t.Errorf("status of the crashed service: %v %+v", err, st)
				}
				// af logs --previous: the crashed container's last words, by instance.
				var out strings.Builder
				deadline := time.Now().Add(30 * time.Second)
				for {
					out.Reset()
					err := rt.Logs(ctx, ref, afruntime.LogOptions{Service: "svc", Previous: true}, &out)
					if err == nil && strings.Contains(out.String(), "| about to fail") {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("af logs --previous of the crashed service: %v\n%s", err, out.String())
					}
					time.Sleep(time.Second)
				}
				t.Logf("af logs --previous:\n%s", out.String())
			}
		})
	}
}

// TestUpPublishesArchives: a service given as a docker archive is pushed to runtime.registry
// (the cluster's registry on loopback), deployed by digest and pulled by the node; a second up
// uploads nothing.
func TestUpPublishesArchives(t *testing.T) {
	f := setup(t)
	requireEnforcer(t, f.h)
	ctx := ctxFor(t, 10*time.Minute)
	var said []string
	var mu sync.Mutex
	rt := f.runtime(t, func(o *Options) {
		o.Progress = func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			said = append(said, fmt.Sprintf(format, args...))
			t.Logf("af: "+format, args...)
		}
	})
	archive := filepath.Join(t.TempDir(), "app.tar")
	if err := f.h.WriteTestImage(ctx, archive, "af.test/archive-app:1", "AF_TEST_BUILD=archive"); err != nil {
		t.Fatal(err)
	}
	m := small(t, map[string]*manifest.Service{"app": {Port: 8080, Command: manifest.Command{Exec: []string{"aftool", "serve", "-tcp", ":8080", "-udp", ""}}}})
	m.Services["app"].Image = ""
	m.Runtime.Registry = f.h.Registry + "/af-e2e"
	ref := afruntime.Ref{ID: "archive-test", Manifest: m}
	down(t, rt, ref)
	// af's own binary is published as the engine image too, and pods pull it by digest.
	// Built with its own version string, so the published engine image differs from the one
	// imported into the node: a pod pulling an image identical to a node's imported one from
	// the registry breaks the node's copy (containerd 1.6), and later tests need that copy.
	rt.opts.PublishEngine = afbuild.Binary(t, afbuild.LDFlags("-X github.com/antifailure/af/version.Version=publish-test"))
	// Credentials for the registry (it accepts any): af writes a pull secret every pod uses.
	dockerConfig := t.TempDir()
	if err := os.WriteFile(filepath.Join(dockerConfig, "config.json"), []byte(`{"auths":{"`+f.h.Registry+`":{"auth":"`+base64.StdEncoding.EncodeToString([]byte("previews:s3cret"))+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", dockerConfig)
	spec := afruntime.Spec{Ref: ref, Archives: map[string]string{"app": archive}}
	if _, err := rt.Up(ctx, spec); err != nil {
		t.Fatal(err)
	}
	d, err := f.kube.AppsV1().Deployments("af-env-archive-test").Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	image := d.Spec.Template.Spec.Containers[0].Image
	if !strings.HasPrefix(image, f.h.Registry+"/af-e2e/small/app@sha256:") {
		t.Errorf("deployed %q, not by digest from the registry", image)
	}
	if gate := d.Spec.Template.Spec.InitContainers[0].Image; !strings.HasPrefix(gate, f.h.Registry+"/af-e2e/af-engine@sha256:") {
		t.Errorf("the gate runs %q, not the published engine image", gate)
	}
	sc, err := f.kube.AppsV1().Deployments("af-env-archive-test").Get(ctx, SidecarName, metav1.GetOptions{})
	if err != nil || sc.Spec.Template.Spec.Containers[0].Image != d.Spec.Template.Spec.InitContainers[0].Image {
		t.Errorf("the sidecar does not run the published engine image: %v", err)
	}
	secret, err := f.kube.CoreV1().Secrets("af-env-archive-test").Get(ctx, RegistrySecret, metav1.GetOptions{})
	if err != nil || secret.Type != corev1.SecretTypeDockerConfigJson || !strings.Contains(string(secret.Data[corev1.DockerConfigJsonKey]), `"username":"previews"`) {
		t.Errorf("pull secret: %v %+v", err, secret)
	}
	for _, ps := range [][]corev1.LocalObjectReference{d.Spec.Template.Spec.ImagePullSecrets, sc.Spec.Template.Spec.ImagePullSecrets} {
		if len(ps) != 1 || ps[0].Name != RegistrySecret {
			t.Errorf("a pod does not use the pull secret: %v", ps)
		}
	}
	// A second service whose image: is a tag in the same registry runs it pinned by digest.
	digest := image[strings.Index(image, "@sha256:")+len("@sha256:"):]
	m.Services["pinned"] = &manifest.Service{Kind: "worker", Image: f.h.Registry + "/af-e2e/small/app:af-" + digest[:16], Replicas: 1,
		Command: manifest.Command{Exec: []string{"aftool", "serve", "-tcp", ":8080", "-udp", ""}}}
	mu.Lock()
	said = nil
	mu.Unlock()
	if _, err := rt.Up(ctx, spec); err != nil {
		t.Fatal(err)
	}
	pd, err := f.kube.AppsV1().Deployments("af-env-archive-test").Get(ctx, "pinned", metav1.GetOptions{})
	if err != nil || pd.Spec.Template.Spec.Containers[0].Image != image {
		t.Errorf("the tagged image was not pinned to %s: %v", image, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(strings.Join(said, "\n"), "images: app is "+image+" (0 bytes uploaded, 0 of them layers)") {
		t.Errorf("second up did not publish the unchanged image for free:\n%s", strings.Join(said, "\n"))
	}
}

// TestUpRefusedWithHoles is the cluster as nobody hardened it: an enforcer enforcing IPv4, but
// IPv6 left on in pods and the node open (kube-router's NodePort exemption, or under
// kube-network-policies the node and the API server whole). The other routes are denied, and
// af up must still refuse, naming each open route (openRoutes), having run no service image.
func TestUpRefusedWithHoles(t *testing.T) {
	f := setup(t)
	// The negative control's cause, read off the machine: the holes open.
	f.h.RequireState(t, testcluster.StateHoles)
	holes := openRoutes(t, f.h)
	ctx := ctxFor(t, 10*time.Minute)
	// The node's listener in the NodePort range is not named: the node route tries the
	// kubelet alone, and the listener must be found without being told of it.
	rt := f.runtime(t, func(o *Options) {
		o.GateEnv = maps.Clone(o.GateEnv)
		o.GateEnv["AF_GATE_NODE_PORTS"] = "10250/tcp"
	})
	ref := afruntime.Ref{ID: "shop-holes", Manifest: shop(t)}
	down(t, rt, ref)
	events := watchPods(t, f.kube, ref.ID)
	start := time.Now()
	res, err := rt.Up(ctx, afruntime.Spec{Ref: ref, Images: f.images()})
	seen := events()
	if failure.CodeOf(err) != failure.NotContained.Code {
		t.Fatalf("want AF-RUN-043, got %v", err)
	}
	for _, route := range holes {
		if !strings.Contains(err.Error(), route) {
			t.Errorf("the error does not name route %s: %v", route, err)
		}
	}
	if res == nil || res.Probe == nil || res.Probe.Verdict != gate.Escape {
		t.Fatalf("no escape verdict returned: %+v", res)
	}
	escaped := map[string]bool{}
	for _, a := range res.Probe.Escaped {
		escaped[a.Route] = true
	}
	for _, route := range holes {
		if !escaped[route] {
			t.Errorf("the probe's verdict does not record route %s as escaped: %+v", route, res.Probe.Escaped)
		}
	}
	for _, a := range res.Probe.Routes {
		t.Logf("probe: %-16s %-40s %-8s %s", a.Route, a.Target, a.Outcome, a.Detail)
		switch a.Route {
		case gate.RouteTCP, gate.RouteDNS, gate.RouteMetadata, gate.RouteAPIServer, gate.RouteNode:
			if a.Outcome != gate.Denied && !slices.Contains(holes, a.Route) {
				t.Errorf("IPv4 route %s is not denied: %+v", a.Route, a)
			}
		}
	}
	noApplicationStarted(t, seen)
	t.Logf("refused after %s: %v", time.Since(start).Round(time.Millisecond), err)
}

// openRoutes reads the cluster's open holes off the machine and names the probe's routes
// that must escape through them, with the node's listener in the NodePort range unnamed:
// IPv6 left on in pods opens the link-local segment; under kube-router its whole NodePort
// exemption opens the node's listeners there, found by the node's own resets in the range
// against kube-router's rejection below it (node-unannounced; the kubelet, outside the range,
// stays denied); under kube-network-policies, without the rule that queues pods' connections
// to the node, the whole node is open (the kubelet answers), and with it the API server, whose
// Service lands on the node (node-unannounced cannot tell: the node's own reset everywhere).
func openRoutes(t *testing.T, h *testcluster.Handle) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o, err := h.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	if !o.IPv6Governed() {
		routes = append(routes, gate.RouteLinkLocal)
	}
	if o.DualStack && !o.IPv6Governed() {
		// Pods' global IPv6 ungoverned: every IPv6 route the probe has, and the node's
		// listener on its IPv6 address (named: GateEnv's node ports are kept below).
		routes = append(routes, gate.RouteTCP+"-v6", gate.RouteDNS+"-v6", gate.RouteMetadata+"-v6", gate.RouteNode+"-v6")
	}
	switch {
	case o.KubeRouter && o.NodePortExemption == "30000:32767":
		routes = append(routes, gate.RouteNodeUnannounced)
	case o.KubeNetworkPolicies && !o.KubeNetworkPoliciesNode:
		routes = append(routes, gate.RouteNode, gate.RouteAPIServer)
	}
	if len(routes) == 0 {
		t.Fatalf("no hole is open on this cluster: %+v", o)
	}
	t.Logf("holes open: the probe must name %v", routes)
	return routes
}

// TestCIDRRuleCannotOpenTheCluster: a manifest cidr rule wide enough to hold the pod range,
// the node and the Service range (10.0.0.0/8 on the ports that matter) gets the sidecar into
// none of them, through the explicit proxy or by the transparent port, while a pod of another
// namespace and the kubelet answer from outside any environment.
func TestCIDRRuleCannotOpenTheCluster(t *testing.T) {
	besideOthers(t)
	f := setup(t)
	requireEnforcer(t, f.h)
	ctx := ctxFor(t, 10*time.Minute)
	kubectl := func(stdin string, args ...string) {
		t.Helper()
		if _, err := f.h.Kubectl(ctx, stdin, args...); err != nil {
			t.Fatal(err)
		}
	}
	// A pod of another namespace, serving HTTP on 80 with a banner.
	const targetNS, banner = "af-cidr-target", "af-cidr-target-banner"
	kubectl("", "create", "namespace", targetNS)
	t.Cleanup(func() { _, _ = f.h.Kubectl(context.Background(), "", "delete", "namespace", targetNS, "--wait=false") })
	kubectl(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: target, namespace: %s}
spec:
  containers:
  - name: target
    image: %s
    imagePullPolicy: Never
    command: ["sh", "-c", "mkdir -p /w && echo %s > /w/index.html && exec busybox httpd -f -p 80 -h /w"]
`, targetNS, f.h.TestImage, banner), "apply", "-f", "-")
	kubectl("", "-n", targetNS, "wait", "--for=condition=Ready", "pod/target", "--timeout=2m")
	pod, err := f.kube.CoreV1().Pods(targetNS).Get(ctx, "target", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	podIP, kubelet := pod.Status.PodIP, net.JoinHostPort(f.h.APIServerIP, "10250")

	m := shop(t)
	m.Egress.Rules = append(m.Egress.Rules, manifest.EgressRule{CIDR: "10.0.0.0/8", Ports: []int{80, 443, 10250}, Mode: "allow"})
	rt := f.runtime(t)
	ref := afruntime.Ref{ID: "shop-cidr", Manifest: m}
	down(t, rt, ref)
	if _, err := rt.Up(ctx, afruntime.Spec{Ref: ref, Images: f.images()}); err != nil {
		t.Fatal(err)
	}
	// The sidecar's own control port (the decision log) and the cluster's ranges it was given.
	scPods, err := f.kube.CoreV1().Pods("af-env-shop-cidr").List(ctx, metav1.ListOptions{LabelSelector: LabelRole + "=" + RoleSidecar})
	if err != nil || len(scPods.Items) != 1 {
		t.Fatalf("sidecar pods: %v", err)
	}
	control := net.JoinHostPort(scPods.Items[0].Status.PodIP, "9901")
	secret, err := f.kube.CoreV1().Secrets("af-env-shop-cidr").Get(ctx, SidecarConfigName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{f.h.PodCIDR, f.h.ServiceCIDR, f.h.APIServerIP + "/32"} {
		if !strings.Contains(string(secret.Data[sidecarConfigFile]), "- "+r+"\n") {
			t.Errorf("the sidecar's cluster_cidrs lack %s:\n%s", r, secret.Data[sidecarConfigFile])
		}
	}
	// Controls, from a plain pod of another namespace: all answer.
	ctlPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "control", Namespace: targetNS},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "control", Image: f.h.TestImage, ImagePullPolicy: corev1.PullNever,
			Command: []string{"sh", "-c", checkScript([][2]string{
				{"pod", "aftool http -timeout 5s http://" + podIP + "/"},
				{"kubelet", "aftool connect -timeout 3s " + kubelet},
			})},
		}}},
	}
	ctlLog, err := (&harness{kube: f.kube}).runPod(ctx, ctlPod)
	if err != nil {
		t.Fatal(err)
	}
	ctl := parseResults(ctlLog)
	if ctl["pod"].rc != "0" || !strings.Contains(ctl["pod"].out, banner) || ctl["kubelet"].rc != "0" {
		t.Fatalf("controls did not answer from outside every environment: %+v", ctl)
	}
	// The control port answers the node (the kubelet's readiness checks come from there), as
	// the test runs on it; its policy admits no pod to it.
	hc := &http.Client{Timeout: 3 * time.Second}
	if resp, err := hc.Get("http://" + control + "/healthz"); err != nil {
		t.Fatalf("control: the sidecar's control port does not answer the node: %v", err)
	} else {
		resp.Body.Close()
	}

	connect := func(target string) string {
		return `p=${HTTP_PROXY#http://}; (printf 'CONNECT ` + target + ` HTTP/1.1\r\nHost: ` + target + `\r\n\r\n'; sleep 3) | nc -w 5 ${p%:*} ${p##*:} | tr -d '\r' | sed -n '1p'`
	}
	transparent := func(host string) string {
		return `p=${HTTP_PROXY#http://}; (printf 'GET / HTTP/1.1\r\nHost: ` + host + `\r\nConnection: close\r\n\r\n'; sleep 3) | nc -w 5 ${p%:*} 80 | tr -d '\r' | sed -n '1p;$p'`
	}
	log := f.inPod(t, "af-env-shop-cidr", "web", "cidr", checkScript([][2]string{
		{"connect-pod", connect(net.JoinHostPort(podIP, "80"))},
		{"connect-kubelet", connect(kubelet)},
		{"proxy-get-pod", viaProxy(podIP)},
		{"transparent-pod", transparent(podIP)},
		{"sidecar-control", "aftool http -timeout 3s http://" + control + "/healthz"},
	}))
	t.Logf("from inside a web pod:\n%s", log)
	r := parseResults(log)
	for _, name := range []string{"connect-pod", "connect-kubelet", "proxy-get-pod", "transparent-pod", "sidecar-control"} {
		c, ok := r[name]
		if !ok || strings.Contains(c.out, banner) || strings.Contains(c.out, " 200") || (name == "sidecar-control" && c.rc == "0") {
			t.Errorf("ESCAPED through the sidecar: %s: %+v", name, c)
		}
	}
	// The sidecar said why: the cluster's range, which no rule opens.
	sc, _ := f.kube.CoreV1().Pods("af-env-shop-cidr").List(ctx, metav1.ListOptions{LabelSelector: LabelRole + "=" + RoleSidecar})
	var sidecarLog string
	for _, p := range sc.Items {
		raw, _ := f.kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		sidecarLog += string(raw)
	}
	if !strings.Contains(sidecarLog, "no rule opens") {
		t.Errorf("the sidecar's log does not give the cluster range as the reason:\n%s", failure.LastLines(sidecarLog, 30))
	}
}
