package kubernetes

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/antifailure/af/internal/afbuild"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/testcluster"
	"github.com/antifailure/af/version"
)

// fixture is what every cluster test shares: the cluster, the engine image and the example's
// images imported into the node, and an administrator's client for looking at what af made.
type fixture struct {
	h                     *testcluster.Handle
	kube                  kubernetes.Interface
	webImage, workerImage string
	ingress               *IngressController
}

var (
	fixtureOnce sync.Once
	fixtureVal  *fixture
	fixtureErr  error
)

func setup(t *testing.T) *fixture {
	t.Helper()
	if kc := os.Getenv("AF_CONFORMANCE_KUBECONFIG"); kc != "" {
		fixtureOnce.Do(func() { fixtureVal, fixtureErr = externalFixture(kc) })
		if fixtureErr != nil {
			t.Fatal(fixtureErr)
		}
		return fixtureVal
	}
	h := testcluster.Require(t)
	fixtureOnce.Do(func() { fixtureVal, fixtureErr = newFixture(h) })
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
	return fixtureVal
}

func newFixture(h *testcluster.Handle) (*fixture, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "af-runtime-test")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// The engine image of this tree, under the name this build deploys.
	if err := h.ImportEngineImage(ctx, "../.."); err != nil {
		return nil, err
	}
	// The example's services, from their static binaries.
	fx := &fixture{h: h, webImage: "af.local/shop-web:test", workerImage: "af.local/shop-worker:test",
		ingress: &IngressController{Namespace: "af-ingress", Labels: map[string]string{"app.kubernetes.io/name": "traefik"}}}
	for ref, pkg := range map[string]string{fx.webImage: "./web", fx.workerImage: "./worker"} {
		out := filepath.Join(dir, "shop-"+strings.TrimPrefix(pkg, "./"))
		if err := afbuild.Build(ctx, "../../examples/shop", out, afbuild.Package(pkg)); err != nil {
			return nil, err
		}
		if err := h.ImportBinaryImage(ctx, ref, out); err != nil {
			return nil, err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", h.Kubeconfig)
	if err != nil {
		return nil, err
	}
	fx.kube, err = kubernetes.NewForConfig(cfg)
	return fx, err
}

// externalFixture is a cluster other than the test cluster (make k8s-conformance: k3d), with
// the test image and the engine image already imported and the fake internet beside it. Only
// the conformance suite and the startup proof run against it.
//
//	AF_CONFORMANCE_KUBECONFIG       the cluster's kubeconfig (its current context is used)
//	AF_CONFORMANCE_APISERVER        host:port of the API server as pods would reach it directly
//	AF_CONFORMANCE_INGRESS          host:port where the ingress controller serves preview URLs
//	AF_CONFORMANCE_INGRESS_CONTROLLER  NAMESPACE/KEY=VALUE of the controller's pods
//	AF_CONFORMANCE_NODE_SERVICE     host:port of a host-network listener in the NodePort range (optional)
func externalFixture(kubeconfig string) (*fixture, error) {
	need := map[string]string{}
	for _, k := range []string{"AF_CONFORMANCE_APISERVER", "AF_CONFORMANCE_INGRESS", "AF_CONFORMANCE_INGRESS_CONTROLLER"} {
		if need[k] = os.Getenv(k); need[k] == "" {
			return nil, fmt.Errorf("%s is not set: make k8s-conformance sets it", k)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ns, sel, ok := strings.Cut(need["AF_CONFORMANCE_INGRESS_CONTROLLER"], "/")
	k, v, ok2 := strings.Cut(sel, "=")
	if !ok || !ok2 {
		return nil, fmt.Errorf("AF_CONFORMANCE_INGRESS_CONTROLLER %q: want NAMESPACE/KEY=VALUE", need["AF_CONFORMANCE_INGRESS_CONTROLLER"])
	}
	apiIP, _, err := net.SplitHostPort(need["AF_CONFORMANCE_APISERVER"])
	if err != nil {
		return nil, fmt.Errorf("AF_CONFORMANCE_APISERVER: %w", err)
	}
	h := &testcluster.Handle{
		Kubeconfig: kubeconfig, APIServer: "https://" + need["AF_CONFORMANCE_APISERVER"], APIServerIP: apiIP,
		IngressHTTP: need["AF_CONFORMANCE_INGRESS"], TestImage: testcluster.TestImageRef,
		Enforcer: "external", Internet: testcluster.Internet(), NodeService: os.Getenv("AF_CONFORMANCE_NODE_SERVICE"),
	}
	return &fixture{h: h, kube: kube, ingress: &IngressController{Namespace: ns, Labels: map[string]string{k: v}}}, nil
}

// runtime returns the runtime under test, its gates and probe pointed at the fake internet.
func (fx *fixture) runtime(t *testing.T, mod ...func(*Options)) *Runtime {
	o := Options{
		Kubeconfig:  fx.h.Kubeconfig,
		EngineImage: version.LocalEngineImage,
		GateEnv:     fx.h.GateEnv(),
		Progress:    func(format string, args ...any) { t.Logf("af: "+format, args...) },
		// Preview hosts do not resolve here: they are reached where Traefik listens.
		IngressController: fx.ingress,
		IngressAddress:    fx.h.IngressHTTP,
		URLScheme:         "http",
	}
	for _, m := range mod {
		m(&o)
	}
	return New(o)
}

// shop is the example's manifest, its egress rules naming the fake internet's hosts.
func shop(t *testing.T) *manifest.Manifest {
	t.Helper()
	res, err := manifest.Load("../../examples/shop/af.yaml", nil)
	if err != nil || !res.Valid() {
		t.Fatalf("example manifest: %v %v", err, res.Err("af.yaml"))
	}
	m := res.Manifest
	m.Egress.Rules = []manifest.EgressRule{
		{Host: fx(t).h.Internet.AllowedAPIHost, Ports: []int{80, 443}, Mode: "allow"},
		{Host: fx(t).h.Internet.BlockedAPIHost, Mode: "block"},
	}
	return m
}

func fx(t *testing.T) *fixture { return setup(t) }

// small is a manifest of services that run the test image (busybox and aftool).
func small(t *testing.T, services map[string]*manifest.Service) *manifest.Manifest {
	t.Helper()
	m := &manifest.Manifest{Name: "small", Runtime: manifest.Runtime{Provider: "kubernetes", NamespacePrefix: "af-env-", TTL: "1h"}, Services: services}
	for _, s := range services {
		if s.Image == "" {
			s.Image = fx(t).h.TestImage
		}
		if s.Replicas == 0 {
			s.Replicas = 1
		}
	}
	return m
}

func (fx *fixture) images() map[string]string {
	return map[string]string{"web": fx.webImage, "worker": fx.workerImage}
}

// besideOthers runs a cluster test beside the others that call it, after the serial ones
// (go test -parallel sets how many at once). Such a test touches only namespaces of its own
// environments and asks for little of the node. These run alone, before them: TestWatch (it
// stops the enforcer), TestPreflightOnTheCluster (it adds a node the scheduler could use),
// TestUpPublishesArchives (it sets DOCKER_CONFIG; make test runs it in a process of its own),
// and TestQuotaAndLimitRange and TestReplicasAndResources (they ask for most of the node's CPU,
// and af up's capacity preflight counts what the others asked for).
func besideOthers(t *testing.T) {
	t.Helper()
	t.Parallel()
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// down removes an environment at the end of a test, whatever happened.
func down(t *testing.T, rt *Runtime, ref afruntime.Ref) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := rt.Down(ctx, ref); err != nil {
			t.Errorf("cleanup: af down %s: %v", ref.ID, err)
		}
	})
}

// podEvent is one thing seen of a pod while af worked.
type podEvent struct {
	at       time.Time
	kind     watch.EventType
	name     string
	workload string
	role     string
	ready    bool
	// started: an application container (any but the gate) was seen running or ended.
	started bool
}

// watchPods records every pod of an environment, from before af up creates its namespace:
// when each was first seen, first seen with an application container started, first seen
// ready, and seen gone. It lists every 100 ms rather than
// watching: this API server's watch cache can lag a fresh watch ("too large resource
// version") and a lost event would hide exactly what is being checked.
func watchPods(t *testing.T, kube kubernetes.Interface, id string) func() []podEvent {
	ctx, cancel := context.WithCancel(context.Background())
	var events []podEvent
	done := make(chan struct{})
	go func() {
		defer close(done)
		live := map[string]bool{}
		ready := map[string]bool{}
		started := map[string]bool{}
		for ctx.Err() == nil {
			list, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: LabelEnvironment + "=" + id})
			if err == nil {
				now := time.Now()
				seen := map[string]bool{}
				for _, pod := range list.Items {
					seen[pod.Name] = true
					e := podEvent{at: now, name: pod.Name, workload: pod.Labels[LabelWorkload], role: pod.Labels[LabelRole]}
					if !live[pod.Name] {
						live[pod.Name] = true
						e.kind = watch.Added
						events = append(events, e)
					}
					if !started[pod.Name] && appStarted(&pod) {
						started[pod.Name] = true
						e.kind, e.started = watch.Modified, true
						events = append(events, e)
						e.started = false
					}
					for _, c := range pod.Status.Conditions {
						if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && !ready[pod.Name] {
							ready[pod.Name] = true
							e.kind, e.ready = watch.Modified, true
							events = append(events, e)
						}
					}
					if pod.DeletionTimestamp != nil && live[pod.Name] {
						e.kind = watch.Deleted
						events = append(events, e)
						live[pod.Name] = false
					}
				}
				for name, on := range live {
					if on && !seen[name] {
						events = append(events, podEvent{at: now, kind: watch.Deleted, name: name, workload: workloadOf(events, name)})
						live[name] = false
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() []podEvent {
		cancel()
		<-done
		return events
	}
}

// appStarted reports whether any container of the pod but the gate has run: the probe's one
// container is af's own and counts as none.
func appStarted(pod *corev1.Pod) bool {
	if pod.Labels[LabelWorkload] == WorkloadProbe {
		return false
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if cs.Name == GateContainer {
				continue
			}
			if cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil {
				return true
			}
		}
	}
	return false
}

func workloadOf(events []podEvent, name string) string {
	for _, e := range events {
		if e.name == name {
			return e.workload
		}
	}
	return ""
}

// inPod runs script in a pod made from a service's pod template: same labels (so the same
// policies), the same gate, the same DNS and proxy settings, but the test image. It returns
// the pod's log.
func (fx *fixture) inPod(t *testing.T, ns, service, name, script string) string {
	t.Helper()
	ctx := ctxFor(t, 4*time.Minute)
	d, err := fx.kube.AppsV1().Deployments(ns).Get(ctx, service, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tpl := d.Spec.Template.DeepCopy()
	labels := tpl.Labels
	labels[LabelWorkload] = "test" // not one of the service's instances
	app := tpl.Spec.Containers[0]
	app.Name, app.Image, app.ImagePullPolicy = "test", fx.h.TestImage, corev1.PullNever
	app.Command, app.Args, app.ReadinessProbe, app.Ports = []string{"sh", "-c", script}, nil, nil, nil
	tpl.Spec.Containers = []corev1.Container{app}
	tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}, Spec: tpl.Spec}
	log, err := (&harness{kube: fx.kube}).runPod(ctx, pod)
	if err != nil {
		t.Fatalf("pod %s: %v", name, err)
	}
	return log
}

// checkScript runs each named command and prints "RESULT name rc output" for it.
func checkScript(checks [][2]string) string {
	var b strings.Builder
	for _, c := range checks {
		fmt.Fprintf(&b, "out=$(%s 2>&1); rc=$?; echo \"RESULT %s $rc $(echo $out | head -c 200)\"\n", c[1], c[0])
	}
	return b.String()
}

type checkResult struct {
	rc  string
	out string
}

func parseResults(log string) map[string]checkResult {
	out := map[string]checkResult{}
	for _, m := range regexp.MustCompile(`(?m)^RESULT (\S+) (\d+) ?(.*)$`).FindAllStringSubmatch(log, -1) {
		out[m[1]] = checkResult{rc: m[2], out: m[3]}
	}
	return out
}

// requireEnforcer fails the test unless the cluster, read off the machine, enforces with its
// holes closed: make test runs these tests only there (TestUpRefusedWithoutEnforcer and
// TestUpRefusedWithHoles cover the other states).
func requireEnforcer(t *testing.T, h *testcluster.Handle) {
	t.Helper()
	h.RequireState(t, testcluster.StateEnforcing)
}

// viaIngress GETs url from this machine through the cluster's ingress controller.
func (fx *fixture) viaIngress(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxFor(t, 10*time.Second), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, fx.h.IngressHTTP)
	}}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s through %s: %v", url, fx.h.IngressHTTP, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(body)
}
