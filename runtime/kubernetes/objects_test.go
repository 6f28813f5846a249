package kubernetes

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
	sidecarconfig "github.com/antifailure/af/sidecar/config"
)

func testEnv() *env {
	m := &manifest.Manifest{
		Name:    "shop",
		Runtime: manifest.Runtime{Provider: "kubernetes", NamespacePrefix: "af-env-"},
		Services: map[string]*manifest.Service{
			"web":    {Kind: "web", Port: 8080, HealthPath: "/healthz", Replicas: 1, Resources: &manifest.Resources{CPU: "100m", Memory: "64Mi"}, Migrate: manifest.Command{Exec: []string{"/web", "migrate"}}, Env: map[string]string{"A": "1"}},
			"worker": {Kind: "worker", Port: 9000, Replicas: 3, Resources: &manifest.Resources{Memory: "32Mi"}},
			"cron":   {Kind: "cron", Schedule: "@hourly", Replicas: 1, Command: manifest.Command{Shell: "run-report"}},
		},
		Egress: manifest.Egress{Default: "block", Rules: []manifest.EgressRule{
			{CIDR: "10.20.0.0/16", Ports: []int{5432}, Mode: "allow"},
			{CIDR: "10.30.0.0/16", Mode: "block"},
		}},
	}
	return &env{
		ID: "shop-pr-1", Namespace: "af-env-shop-pr-1", Manifest: m,
		Images:      map[string]string{"web": "r/web@sha256:1", "worker": "r/worker@sha256:2", "cron": "r/cron@sha256:3"},
		EngineImage: "ghcr.io/antifailure/af-engine:x", SidecarIP: "10.96.5.5", Domain: "cluster.local",
		GateEnv:  map[string]string{"AF_GATE_PUBLIC_TCP": "198.51.100.10:80"},
		Resolver: resolverRef{Addr: "10.96.0.10:53", Namespace: "kube-system", Selector: map[string]string{"k8s-app": "kube-dns"}},
	}
}

// TestSidecarPortsAreTheSidecarsPorts: the ports services may reach (policy), the Service's
// ports and the ports the sidecar listens on by default are one set; a port missing from one
// of them makes clients hang.
func TestSidecarPortsAreTheSidecarsPorts(t *testing.T) {
	res, err := sidecarconfig.Config{Environment: "e", Namespace: "n", ClusterResolver: "10.96.0.10:53", AdvertiseIPv4: "10.96.5.5"}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	l := res.Listen
	var listens []string
	for _, a := range append([]string{l.Proxy, l.HTTP, l.HTTPS, l.DNS}, l.SMTP...) {
		_, p, _ := net.SplitHostPort(a)
		listens = append(listens, "TCP/"+p)
	}
	_, dns, _ := net.SplitHostPort(l.DNS)
	listens = append(listens, "UDP/"+dns)
	sort.Strings(listens)

	e := testEnv()
	var svc, pol, in []string
	for _, p := range e.sidecarService().Spec.Ports {
		svc = append(svc, fmt.Sprintf("%s/%d", p.Protocol, p.Port))
		if p.TargetPort.IntValue() != int(p.Port) {
			t.Errorf("service port %s maps to %s", p.Name, p.TargetPort.String())
		}
	}
	pols := map[string]*networkingv1.NetworkPolicy{}
	for _, p := range e.policies() {
		pols[p.Name] = p
	}
	for _, p := range pols[PolicyServices].Spec.Egress[0].Ports {
		pol = append(pol, fmt.Sprintf("%s/%s", *p.Protocol, p.Port.String()))
	}
	for _, p := range pols[PolicySidecarIn].Spec.Ingress[0].Ports {
		in = append(in, fmt.Sprintf("%s/%s", *p.Protocol, p.Port.String()))
	}
	for name, got := range map[string][]string{"service": svc, "services egress": pol, "sidecar ingress": in} {
		sort.Strings(got)
		if strings.Join(got, " ") != strings.Join(listens, " ") {
			t.Errorf("%s ports %v, sidecar listens on %v", name, got, listens)
		}
	}
	for _, p := range svc {
		if strings.HasSuffix(p, "/"+strconv.Itoa(sidecarControlPort)) {
			t.Errorf("the control port is reachable: %s", p)
		}
	}
}

func TestRepoLabel(t *testing.T) {
	for in, want := range map[string]string{
		"acme/shop":                     "acme.shop",
		"Acme/Shop.JS":                  "acme.shop.js",
		"a/" + strings.Repeat("x", 100): "a." + strings.Repeat("x", 61),
		"-x/_y_":                        "x._y",
	} {
		if got := repoLabel(in); got != want {
			t.Errorf("repoLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIngress(t *testing.T) {
	e := testEnv()
	ing := e.ingress("web", e.Manifest.Services["web"], "shop-pr-1-web.preview.example")
	r := ing.Spec.Rules[0]
	b := r.HTTP.Paths[0].Backend.Service
	if r.Host != "shop-pr-1-web.preview.example" || b.Name != "web" || b.Port.Number != 8080 || *r.HTTP.Paths[0].PathType != "Prefix" || ing.Spec.IngressClassName != nil {
		t.Errorf("ingress: %+v", ing.Spec)
	}
	e.Manifest.Runtime.IngressClass = "nginx"
	if c := e.ingress("web", e.Manifest.Services["web"], "h").Spec.IngressClassName; c == nil || *c != "nginx" {
		t.Errorf("ingress class not applied: %v", c)
	}
}

func TestRefuseUnknownRanges(t *testing.T) {
	m := testEnv().Manifest
	partial := clusterRanges{Complete: false, Gaps: []string{"the nodes could not be listed (forbidden)"}}
	err := refuseUnknownRanges(m, partial)
	if e := failure.As(err); e == nil || e.Entry != failure.ClusterRangesUnknown || !strings.Contains(err.Error(), "egress.rules[0] (10.20.0.0/16)") || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("got %v", err)
	}
	if err := refuseUnknownRanges(m, clusterRanges{Complete: true}); err != nil {
		t.Errorf("complete ranges refused: %v", err)
	}
	m.Egress.Rules = nil
	if err := refuseUnknownRanges(m, partial); err != nil {
		t.Errorf("no cidr rule, yet refused: %v", err)
	}
}

// TestHolds: every service and every migration has its own hold; each pod's gate is told its
// own and the probe none; a closed hold selects no pod af makes, a released one the sidecar.
func TestHolds(t *testing.T) {
	e := testEnv()
	hs := holds(e.Manifest)
	want := []string{"af-hold-cron", "af-hold-web", "af-hold-web-migrate", "af-hold-worker"}
	if got := slices.Sorted(maps.Keys(hs)); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("holds %v, want %v", got, want)
	}
	e.Holds = map[string]string{}
	for i, name := range want {
		e.Holds[name] = fmt.Sprintf("10.96.7.%d:3128", i+1)
	}
	holdOf := func(spec corev1.PodSpec) string {
		for _, c := range spec.InitContainers {
			for _, v := range c.Env {
				if v.Name == "AF_GATE_HOLD" {
					return v.Value
				}
			}
		}
		for _, c := range spec.Containers {
			for _, v := range c.Env {
				if v.Name == "AF_GATE_HOLD" {
					t.Errorf("container %s is told a hold: only the gate waits at it", c.Name)
				}
			}
		}
		return ""
	}
	for _, name := range []string{"web", "worker", "cron"} {
		if got := holdOf(e.deployment(name, e.Manifest.Services[name]).Spec.Template.Spec); got != e.Holds[serviceHold(name)] {
			t.Errorf("%s's gate holds at %q, want %q", name, got, e.Holds[serviceHold(name)])
		}
	}
	if got := holdOf(e.migrationJob("web", e.Manifest.Services["web"]).Spec.Template.Spec); got != e.Holds["af-hold-web-migrate"] {
		t.Errorf("the migration's gate holds at %q", got)
	}
	if got := holdOf(e.probePod(DefaultWatch).Spec); got != "" {
		t.Errorf("the probe holds at %q", got)
	}
	// A gate environment from af's own settings cannot name a hold.
	e.GateEnv["AF_GATE_HOLD"] = "10.0.0.1:1"
	if got := holdOf(e.deployment("worker", e.Manifest.Services["worker"]).Spec.Template.Spec); got != e.Holds["af-hold-worker"] {
		t.Errorf("the configured gate environment overrode the hold: %q", got)
	}

	pods := []map[string]string{
		e.deployment("web", e.Manifest.Services["web"]).Spec.Template.Labels,
		e.migrationJob("web", e.Manifest.Services["web"]).Spec.Template.Labels,
		e.probePod(DefaultWatch).Labels,
		e.sidecarDeployment("h").Spec.Template.Labels,
	}
	selects := func(sel, labels map[string]string) bool {
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return true
	}
	for _, name := range want {
		closed, open := e.holdService(name, hs[name], false), e.holdService(name, hs[name], true)
		for i, l := range pods {
			if selects(closed.Spec.Selector, l) {
				t.Errorf("closed hold %s selects pod %d (%v)", name, i, l)
			}
			if got := selects(open.Spec.Selector, l); got != (i == 3) {
				t.Errorf("released hold %s selects pod %d (%v): %v", name, i, l, got)
			}
		}
		if p := open.Spec.Ports[0]; p.Port != holdPort || p.TargetPort.IntValue() != holdPort || p.Protocol != corev1.ProtocolTCP {
			t.Errorf("hold %s port %+v", name, p)
		}
	}
}

// TestPullWillNotWork: the kubelet's words for an image that is not there, or not for these
// credentials, end the wait; those for a registry that may come back do not.
func TestPullWillNotWork(t *testing.T) {
	for msg, want := range map[string]bool{
		`failed to pull and unpack image "af.local/does-not-exist:1": failed to resolve reference "af.local/does-not-exist:1": af.local/does-not-exist:1: not found`: true,
		`rpc error: code = NotFound desc = failed to pull and unpack image "r.test/a:1": manifest unknown`:                                                           true,
		`failed to authorize: failed to fetch anonymous token: unexpected status from GET request to https://r.test/token: 401 Unauthorized`:                         true,
		`pull access denied, repository does not exist or may require authorization`:                                                                                 true,
		`unexpected status from HEAD request to https://r.test/v2/a/manifests/1: 403 Forbidden`:                                                                      true,
		`failed to do request: Head "https://r.test/v2/a/manifests/1": dial tcp 10.0.0.9:443: connect: connection refused`:                                           true,
		`failed to do request: Head "https://r.test/v2/a/manifests/1": dial tcp: lookup r.test on 10.96.0.10:53: no such host`:                                       true,
		`failed to do request: Head "https://r.test/v2/a/manifests/1": http: server gave HTTP response to HTTPS client`:                                              true,
		`failed to do request: Head "https://r.test/v2/a/manifests/1": tls: failed to verify certificate: x509: certificate signed by unknown authority`:             true,
		`failed to do request: Head "https://r.test/v2/a/manifests/1": net/http: TLS handshake timeout`:                                                              false,
		`Back-off pulling image "r.test/a:1"`:                       false,
		`unexpected status from GET request: 429 Too Many Requests`: false,
	} {
		if got := pullWillNotWork(msg); got != want {
			t.Errorf("pullWillNotWork(%q) = %v, want %v", msg, got, want)
		}
	}
}

// TestPullFailed: a pod whose image will not be pulled names the workload, the image and the
// kubelet's reason, with the engine image's own advice for af's containers; one that may still
// be pulled (a rate limit) is waited for.
func TestPullFailed(t *testing.T) {
	pod := func(name, workload, container, image, reason, message string, init bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if workload != "" {
			p.Labels[LabelService] = workload
		}
		st := corev1.ContainerStatus{Name: container, Image: image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}
		if init {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{st}
		} else {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{st}
		}
		return p
	}
	refused := `failed to do request: Head "https://r.test/v2/a/manifests/1": dial tcp 127.0.0.1:9: connect: connection refused`
	cases := []struct {
		name string
		pod  *corev1.Pod
		want []string // in the error; nil: no failure yet
	}{
		{"service, unreachable registry", pod("web-1", "web", "web", "r.test/web:1", "ErrImagePull", refused, false), []string{"service web (pod web-1, container web)", "r.test/web:1", "ErrImagePull", "connection refused", "af up --image"}},
		{"gate, engine image missing", pod("web-2", "web", GateContainer, "ghcr.io/antifailure/af-engine:x", "ErrImagePull", "not found", true), []string{"the gate of service web (pod web-2, container af-gate)", "engine image", "AF_ENGINE_IMAGE"}},
		{"sidecar", pod("af-sidecar-5", "", "sidecar", "ghcr.io/antifailure/af-engine:x", "InvalidImageName", "bad", false), []string{"the sidecar (pod af-sidecar-5", "engine image"}},
		{"never pull", pod("af-probe", "af-probe", "probe", "e:1", "ErrImageNeverPull", "Container image \"e:1\" is not present with pull policy of Never", false), []string{"the probe (pod af-probe", "ErrImageNeverPull"}},
		{"rate limited", pod("web-3", "web", "web", "r.test/web:1", "ErrImagePull", "429 Too Many Requests", false), nil},
		{"back-off without its cause", pod("web-4", "web", "web", "r.test/web:1", "ImagePullBackOff", `Back-off pulling image "r.test/web:1"`, false), nil},
		{"back-off with its cause", pod("web-5", "web", "web", "r.test/web:1", "ImagePullBackOff", `Failed to pull image "r.test/web:1": `+refused, false), []string{"ImagePullBackOff", "connection refused"}},
	}
	for _, c := range cases {
		err := pullFailed(c.pod)
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v, want a wait", c.name, err)
			}
			continue
		}
		if !errors.Is(err, failure.NotReady) {
			t.Errorf("%s: %v, want NotReady", c.name, err)
			continue
		}
		msg := failure.Ensure(err).Error() + " " + failure.Ensure(err).Report().Do
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q does not say %q", c.name, msg, w)
			}
		}
	}
}
