package kubernetes

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

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
		EngineImage: "antifailure/af-engine:x", SidecarIP: "10.96.5.5", Domain: "cluster.local",
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

func TestPolicies(t *testing.T) {
	e := testEnv()
	pols := map[string]*networkingv1.NetworkPolicy{}
	var order []string
	for _, p := range e.policies() {
		pols[p.Name] = p
		order = append(order, p.Name)
	}
	if order[0] != PolicyDenyAll || len(pols[PolicyDenyAll].Spec.PodSelector.MatchLabels) != 0 || len(pols[PolicyDenyAll].Spec.PolicyTypes) != 2 ||
		pols[PolicyDenyAll].Spec.Ingress != nil || pols[PolicyDenyAll].Spec.Egress != nil {
		t.Errorf("deny-all: %+v", pols[PolicyDenyAll].Spec)
	}
	if _, ok := pols[PolicyIngressCtl]; ok {
		t.Errorf("an ingress-controller policy without a domain")
	}
	for _, p := range pols {
		for _, r := range p.Spec.Ingress {
			for _, peer := range r.From {
				if peer.NamespaceSelector != nil {
					t.Errorf("%s admits by namespace", p.Name)
				}
			}
		}
		if p.Name == PolicySidecarOut {
			continue
		}
		for _, r := range p.Spec.Egress {
			for _, peer := range r.To {
				if peer.NamespaceSelector != nil || peer.IPBlock != nil {
					t.Errorf("%s lets services out beyond their environment: %+v", p.Name, peer)
				}
			}
		}
	}
	out := pols[PolicySidecarOut].Spec.Egress
	if len(out) != 3 {
		t.Fatalf("sidecar egress rules: %+v", out)
	}
	if b := out[0].To[0].IPBlock; b.CIDR != "0.0.0.0/0" || strings.Join(b.Except, ",") != "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,169.254.0.0/16" {
		t.Errorf("public egress: %+v", b)
	}
	if r := out[1]; r.To[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "kube-system" || r.To[0].PodSelector.MatchLabels["k8s-app"] != "kube-dns" || len(r.Ports) != 2 {
		t.Errorf("resolver egress: %+v", r)
	}
	// The cidr allow rule opens its range, on its ports; the block rule opens nothing.
	if r := out[2]; r.To[0].IPBlock.CIDR != "10.20.0.0/16" || len(r.Ports) != 1 || r.Ports[0].Port.IntValue() != 5432 {
		t.Errorf("cidr egress: %+v", r)
	}

	e.IPv6 = true
	if got := e.sidecarEgress().Spec.Egress[1].To[0].IPBlock; got == nil || got.CIDR != "::/0" || len(got.Except) != 3 {
		t.Errorf("IPv6 egress: %+v", got)
	}
	e.IngressFrom = &IngressController{Namespace: "ingress", Labels: map[string]string{"app": "traefik"}}
	var ing *networkingv1.NetworkPolicy
	for _, p := range e.policies() {
		if p.Name == PolicyIngressCtl {
			ing = p
		}
	}
	if ing == nil || len(ing.Spec.Ingress[0].Ports) != 1 || ing.Spec.Ingress[0].Ports[0].Port.IntValue() != 8080 || ing.Spec.PodSelector.MatchLabels["dev.antifailure.kind"] != "web" {
		t.Errorf("ingress-controller policy: %+v", ing)
	}
}

func TestServicePods(t *testing.T) {
	e := testEnv()
	for _, name := range []string{"web", "worker", "cron"} {
		s := e.Manifest.Services[name]
		d := e.deployment(name, s)
		spec := d.Spec.Template.Spec
		if *d.Spec.Replicas != int32(s.Replicas) {
			t.Errorf("%s replicas %d", name, *d.Spec.Replicas)
		}
		if *spec.AutomountServiceAccountToken || spec.DNSPolicy != corev1.DNSNone || spec.DNSConfig.Nameservers[0] != "10.96.5.5" ||
			*spec.DNSConfig.Options[0].Value != "1" || spec.DNSConfig.Searches[0] != "af-env-shop-pr-1.svc.cluster.local" {
			t.Errorf("%s pod: token/DNS %+v", name, spec.DNSConfig)
		}
		if len(spec.InitContainers) != 1 || spec.InitContainers[0].Image != e.EngineImage || spec.InitContainers[0].Args[0] != "gate" || spec.InitContainers[0].Command != nil {
			t.Fatalf("%s: gate %+v", name, spec.InitContainers)
		}
		gate, app := spec.InitContainers[0], spec.Containers[0]
		if fmt.Sprint(gate.Resources) != fmt.Sprint(app.Resources) {
			t.Errorf("%s: gate resources %v, app %v", name, gate.Resources, app.Resources)
		}
		env := map[string]string{}
		nodeFrom := ""
		for _, v := range gate.Env {
			env[v.Name] = v.Value
			if v.Name == "AF_GATE_NODE" && v.ValueFrom != nil && v.ValueFrom.FieldRef != nil {
				nodeFrom = v.ValueFrom.FieldRef.FieldPath
			}
		}
		// Nothing turns IPv6 off for the gate: the link-local route looks whenever the pod has
		// IPv6, and the node route is pointed at the pod's own node.
		if _, set := env["AF_GATE_IPV6"]; set || env["AF_SIDECAR"] != "10.96.5.5:3128" || env["AF_GATE_PUBLIC_TCP"] != "198.51.100.10:80" || nodeFrom != "status.hostIP" {
			t.Errorf("%s gate env %v (node from %q)", name, env, nodeFrom)
		}
		if sc := spec.SecurityContext; sc == nil || len(sc.Sysctls) != 1 || sc.Sysctls[0].Name != "net.ipv4.ping_group_range" || sc.Sysctls[0].Value != "65532 65532" {
			t.Errorf("%s: the gate's group may not open an ICMP socket: %+v", name, sc)
		}
		env = map[string]string{}
		for _, v := range app.Env {
			env[v.Name] = v.Value
		}
		if env["HTTP_PROXY"] != "http://10.96.5.5:3128" || env["https_proxy"] != "http://10.96.5.5:3128" || !strings.Contains(env["NO_PROXY"], ",web,") || env["AF_ENVIRONMENT"] != "shop-pr-1" {
			t.Errorf("%s app env %v", name, env)
		}
		for k, v := range d.Spec.Selector.MatchLabels {
			if d.Spec.Template.Labels[k] != v {
				t.Errorf("%s: selector %s=%s not on the template", name, k, v)
			}
		}
	}
	web := e.deployment("web", e.Manifest.Services["web"]).Spec.Template.Spec.Containers[0]
	if web.ReadinessProbe.HTTPGet == nil || web.ReadinessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("web readiness: %+v", web.ReadinessProbe)
	}
	worker := e.deployment("worker", e.Manifest.Services["worker"]).Spec.Template.Spec.Containers[0]
	if worker.ReadinessProbe.TCPSocket == nil || worker.ReadinessProbe.TCPSocket.Port.IntValue() != 9000 {
		t.Errorf("worker readiness: %+v", worker.ReadinessProbe)
	}
	cron := e.deployment("cron", e.Manifest.Services["cron"]).Spec.Template.Spec.Containers[0]
	if cron.ReadinessProbe != nil || strings.Join(cron.Command, " ") != "/bin/sh -c run-report" || e.service("cron", e.Manifest.Services["cron"]) != nil {
		t.Errorf("cron: %+v %v", cron.ReadinessProbe, cron.Command)
	}
	if got := e.service("web", e.Manifest.Services["web"]).Spec.Selector; got[LabelWorkload] != WorkloadService {
		t.Errorf("the web Service would select the migration's pods: %v", got)
	}
}

// TestSizes: requests and limits carry the same figures; a dimension not named is in neither
// map; no sizes at all yields empty requirements (the Deployment sizes never existed).
func TestSizes(t *testing.T) {
	for _, c := range []struct {
		in   *manifest.Resources
		want string
	}{
		{nil, "requests=[] limits=[]"},
		{&manifest.Resources{}, "requests=[] limits=[]"},
		{&manifest.Resources{CPU: "250m"}, "requests=[cpu=250m] limits=[cpu=250m]"},
		{&manifest.Resources{Memory: "1Gi"}, "requests=[memory=1Gi] limits=[memory=1Gi]"},
		{&manifest.Resources{CPU: "2", Memory: "128Mi"}, "requests=[cpu=2 memory=128Mi] limits=[cpu=2 memory=128Mi]"},
	} {
		r := size(c.in)
		if got := fmt.Sprintf("requests=%s limits=%s", rl(r.Requests), rl(r.Limits)); got != c.want {
			t.Errorf("%+v: %s, want %s", c.in, got, c.want)
		}
		if c.in == nil || c.in.CPU == "" && c.in.Memory == "" {
			if r.Requests != nil || r.Limits != nil {
				t.Errorf("%+v: maps present though empty", c.in)
			}
		}
	}
}

func rl(l corev1.ResourceList) string {
	var parts []string
	for k, q := range l {
		parts = append(parts, string(k)+"="+q.String())
	}
	sort.Strings(parts)
	return "[" + strings.Join(parts, " ") + "]"
}

func TestProbeAndMigration(t *testing.T) {
	e := testEnv()
	p := e.probePod()
	if p.Labels[LabelRole] != RoleService || p.Labels[LabelWorkload] != WorkloadProbe || len(p.Spec.InitContainers) != 0 ||
		p.Spec.Containers[0].Image != e.EngineImage || p.Spec.Containers[0].Args[0] != "probe" || p.Spec.RestartPolicy != corev1.RestartPolicyNever ||
		*p.Spec.AutomountServiceAccountToken || p.Spec.DNSPolicy != corev1.DNSNone {
		t.Errorf("probe pod: %+v", p)
	}
	j := e.migrationJob("web", e.Manifest.Services["web"])
	spec := j.Spec.Template.Spec
	if *j.Spec.BackoffLimit != 0 || spec.RestartPolicy != corev1.RestartPolicyNever || spec.InitContainers[0].Name != GateContainer ||
		strings.Join(spec.Containers[0].Command, " ") != "/web migrate" || j.Labels[LabelWorkload] != WorkloadMigration {
		t.Errorf("migration job: %+v", j)
	}
	if j2 := e.migrationJob("web", e.Manifest.Services["web"]); j2.Name != j.Name {
		t.Errorf("job name not stable: %s %s", j.Name, j2.Name)
	}
	e.Images["web"] = "r/web@sha256:other"
	if j3 := e.migrationJob("web", e.Manifest.Services["web"]); j3.Name == j.Name {
		t.Errorf("a new image keeps the job name %s: the migration would not run again", j.Name)
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

func TestHolding(t *testing.T) {
	ns := &corev1.Namespace{
		Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}},
		Status: corev1.NamespaceStatus{Conditions: []corev1.NamespaceCondition{
			{Type: corev1.NamespaceFinalizersRemaining, Status: corev1.ConditionTrue, Message: "Some content in the namespace has finalizers remaining: af.test/hold in 1 resource instances"},
			{Type: corev1.NamespaceDeletionContentFailure, Status: corev1.ConditionFalse, Message: "All content successfully deleted"},
		}},
	}
	if got := holding(ns); !strings.Contains(got, "af.test/hold") || strings.Contains(got, "successfully") {
		t.Errorf("holding: %q", got)
	}
	ns.Status.Conditions = nil
	if got := holding(ns); got != ": finalizers on the namespace: kubernetes" {
		t.Errorf("holding without conditions: %q", got)
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

// TestCIDRRulesNeverOpenTheCluster: a cidr allow rule's ipBlock leaves out every cluster range
// inside it, a rule the cluster's range holds whole opens nothing, and the sidecar's public
// egress leaves out cluster addresses outside the private ranges (a node's public address).
func TestCIDRRulesNeverOpenTheCluster(t *testing.T) {
	e := testEnv()
	e.Cluster = []netip.Prefix{
		netip.MustParsePrefix("10.244.0.0/24"), // pods
		netip.MustParsePrefix("10.244.0.1/32"), // the node, inside the pod range
		netip.MustParsePrefix("10.96.0.0/12"),  // Services
		netip.MustParsePrefix("198.51.100.7/32"),
	}
	e.Manifest.Egress.Rules = []manifest.EgressRule{
		{CIDR: "10.0.0.0/8", Ports: []int{5432}, Mode: "allow"},
		{CIDR: "10.244.0.0/24", Mode: "allow"}, // exactly the pod range: opens nothing
		{CIDR: "10.20.0.0/16", Mode: "allow"},  // a database's range, clear of the cluster
	}
	np := e.sidecarEgress()
	var blocks []string
	for _, r := range np.Spec.Egress {
		for _, p := range r.To {
			if p.IPBlock != nil {
				blocks = append(blocks, p.IPBlock.CIDR+" except "+strings.Join(p.IPBlock.Except, ","))
			}
		}
	}
	want := []string{
		"0.0.0.0/0 except 10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,169.254.0.0/16,198.51.100.7/32",
		"10.0.0.0/8 except 10.244.0.0/24,10.96.0.0/12",
		"10.20.0.0/16 except ",
	}
	if strings.Join(blocks, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ipBlocks:\n%s\nwant:\n%s", strings.Join(blocks, "\n"), strings.Join(want, "\n"))
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
	if got := sortedKeys(hs); strings.Join(got, " ") != strings.Join(want, " ") {
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
	if got := holdOf(e.probePod().Spec); got != "" {
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
		e.probePod().Labels,
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
		`failed to do request: Head "https://r.test/v2/a/manifests/1": dial tcp 10.0.0.9:443: connect: connection refused`:                                           false,
		`failed to do request: Head "https://r.test/v2/a/manifests/1": net/http: TLS handshake timeout`:                                                              false,
		`Back-off pulling image "r.test/a:1"`:                       false,
		`unexpected status from GET request: 429 Too Many Requests`: false,
	} {
		if got := pullWillNotWork(msg); got != want {
			t.Errorf("pullWillNotWork(%q) = %v, want %v", msg, got, want)
		}
	}
}
