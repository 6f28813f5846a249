package kubernetes

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/antifailure/af/manifest"
)

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
			*spec.DNSConfig.Options[0].Value != "1" || spec.DNSConfig.Searches[0] != "af-env-shop-pr-1.svc.cluster.local" ||
			len(spec.DNSConfig.Options) != 3 || spec.DNSConfig.Options[1].Name != "timeout" || *spec.DNSConfig.Options[1].Value != "1" ||
			spec.DNSConfig.Options[2].Name != "attempts" || *spec.DNSConfig.Options[2].Value != "5" {
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
		if _, set := env["AF_GATE_IPV6"]; set || env["AF_SIDECAR"] != "10.96.5.5:3128" || env["AF_GATE_PUBLIC_TCP"] != "198.51.100.10:80" || nodeFrom != "status.hostIPs" {
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
	p := e.probePod(DefaultWatch)
	if p.Labels[LabelRole] != RoleService || p.Labels[LabelWorkload] != WorkloadProbe || len(p.Spec.InitContainers) != 0 ||
		p.Spec.Containers[0].Image != e.EngineImage || p.Spec.Containers[0].Args[0] != "probe" || p.Spec.RestartPolicy != corev1.RestartPolicyNever ||
		*p.Spec.AutomountServiceAccountToken || p.Spec.DNSPolicy != corev1.DNSNone {
		t.Errorf("probe pod: %+v", p)
	}
	// The watch: --watch and the annotation the readers take its interval from; off, neither.
	if got := strings.Join(p.Spec.Containers[0].Args, " "); got != "probe --watch 1m0s" || p.Annotations[AnnotationWatch] != "1m0s" {
		t.Errorf("probe pod with the watch: args %q, annotations %v", got, p.Annotations)
	}
	if off := e.probePod(-1); len(off.Spec.Containers[0].Args) != 1 || off.Annotations[AnnotationWatch] != "" {
		t.Errorf("probe pod with the watch off: args %q, annotations %v", off.Spec.Containers[0].Args, off.Annotations)
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
