package app

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/antifailure/af/runtime/kubernetes"
	"github.com/antifailure/af/settings"
	"github.com/antifailure/af/version"
)

// deployObjects decodes every object of deploy/app/*.yaml with client-go's own scheme: a field
// Kubernetes does not know fails here.
func deployObjects(t *testing.T, file string) []runtime.Object {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "deploy", "app", file))
	if err != nil {
		t.Fatal(err)
	}
	var out []runtime.Object
	for _, doc := range strings.Split(string(b), "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out = append(out, obj)
	}
	return out
}

// The Deployment runs this release's engine image as af app serve, non-root, on a read-only
// root filesystem without capabilities; two replicas, rolled one new pod before an old one
// goes, preferably on different nodes, one kept through a disruption (the PodDisruptionBudget
// selects the pods); the webhook on port http (8080), the probes on port manage (8081) at
// paths the management handler serves and the webhook's does not; the Service exposes the
// webhook only; every variable it sets is one af reads, and the listen addresses are the ports.
func TestDeployment(t *testing.T) {
	var d *appsv1.Deployment
	var svc *corev1.Service
	var pdb *policyv1.PodDisruptionBudget
	for _, o := range deployObjects(t, "deployment.yaml") {
		switch v := o.(type) {
		case *appsv1.Deployment:
			d = v
		case *corev1.Service:
			svc = v
		case *policyv1.PodDisruptionBudget:
			pdb = v
		}
	}
	if d == nil || svc == nil || pdb == nil {
		t.Fatal("deployment.yaml needs a Deployment, a Service and a PodDisruptionBudget")
	}
	podLabels := labels.Set(d.Spec.Template.Labels)
	if *d.Spec.Replicas != 2 {
		t.Errorf("%d replicas, want 2", *d.Spec.Replicas)
	}
	if st := d.Spec.Strategy; st.Type != appsv1.RollingUpdateDeploymentStrategyType || st.RollingUpdate == nil ||
		st.RollingUpdate.MaxUnavailable == nil || *st.RollingUpdate.MaxUnavailable != intstr.FromInt32(0) ||
		st.RollingUpdate.MaxSurge == nil || *st.RollingUpdate.MaxSurge != intstr.FromInt32(1) {
		t.Errorf("strategy %+v, want RollingUpdate with maxUnavailable 0 and maxSurge 1", st)
	}
	if a := d.Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Error("the pods need a preferred podAntiAffinity")
	} else {
		term := a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err != nil || term.TopologyKey != "kubernetes.io/hostname" || !sel.Matches(podLabels) {
			t.Errorf("anti-affinity term %+v: not the App's pods on one node", term)
		}
	}
	if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || sel.Empty() || !sel.Matches(podLabels) ||
		pdb.Namespace != d.Namespace || pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != intstr.FromInt32(1) || pdb.Spec.MaxUnavailable != nil {
		t.Errorf("PodDisruptionBudget %+v: want minAvailable 1 over the Deployment's pods", pdb.Spec)
	}
	if sel := labels.SelectorFromSet(svc.Spec.Selector); len(svc.Spec.Selector) == 0 || !sel.Matches(podLabels) {
		t.Errorf("the Service selects %v, not the App's pods", svc.Spec.Selector)
	}
	ps := d.Spec.Template.Spec
	c := ps.Containers[0]
	if c.Image != version.ActionImage && !version.PinnedActionImage(c.Image) || !slices.Equal(c.Args, []string{"app", "serve"}) {
		t.Fatalf("image %s args %v, want %s app serve", c.Image, c.Args, version.ActionImage)
	}
	sc, psc := c.SecurityContext, ps.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Fatalf("pod security context %+v: not non-root", psc)
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Fatalf("container security context %+v", sc)
	}
	if ps.ServiceAccountName != "af-app" {
		t.Fatalf("service account %q", ps.ServiceAccountName)
	}
	// The credentials' files are root's unless fsGroup gives them to the pod's group; a mode
	// without the group's read bit then leaves user 65532 unable to read its key (the pods
	// crash-looped so; deploy's TestAppAsShipped runs this file on the cluster).
	for _, v := range ps.Volumes {
		if v.Secret == nil {
			continue
		}
		mode := int32(0o644)
		if v.Secret.DefaultMode != nil {
			mode = *v.Secret.DefaultMode
		}
		if psc.FSGroup == nil || psc.RunAsGroup == nil || *psc.FSGroup != *psc.RunAsGroup || mode&0o040 == 0 || mode&0o004 != 0 {
			t.Errorf("secret volume %s: mode %o, fsGroup %v, runAsGroup %v: the pod's user cannot read it, or every user can", v.Name, mode, psc.FSGroup, psc.RunAsGroup)
		}
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if len(ports) != 2 || ports["http"] != 8080 || ports["manage"] != 8081 {
		t.Fatalf("container ports %v, want http 8080 and manage 8081", ports)
	}
	for _, p := range svc.Spec.Ports {
		if p.TargetPort.String() != "http" && p.TargetPort.IntValue() != 8080 {
			t.Errorf("the Service exposes %s (target %s): only the webhook's port belongs there", p.Name, p.TargetPort.String())
		}
	}
	if len(svc.Spec.Ports) != 1 {
		t.Errorf("the Service has %d ports, want the webhook's only", len(svc.Spec.Ports))
	}
	known := map[string]bool{}
	for _, v := range settings.Vars {
		known[v.Name] = true
	}
	journal := false
	env := map[string]string{}
	for _, e := range c.Env {
		if !known[e.Name] && e.Name != "GOMEMLIMIT" { // GOMEMLIMIT: the Go runtime's
			t.Errorf("the Deployment sets %s, which af does not read", e.Name)
		}
		env[e.Name] = e.Value
		if e.Name == "AF_APP_NAMESPACE" {
			journal = e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
		}
	}
	soft, err := resource.ParseQuantity(strings.TrimSuffix(env["GOMEMLIMIT"], "B")) // 200MiB is 200Mi
	if lim, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || err != nil || soft.Cmp(lim) >= 0 {
		t.Errorf("GOMEMLIMIT %q must be below the memory limit %v", env["GOMEMLIMIT"], c.Resources.Limits.Memory())
	}
	if env["AF_APP_LISTEN"] != ":8080" || env["AF_APP_MANAGE_LISTEN"] != ":8081" {
		t.Errorf("AF_APP_LISTEN %q and AF_APP_MANAGE_LISTEN %q, want :8080 and :8081 (the ports http and manage)", env["AF_APP_LISTEN"], env["AF_APP_MANAGE_LISTEN"])
	}
	if !journal {
		t.Error("AF_APP_NAMESPACE must be the pod's own namespace (the downward API), where the Role lets the journal write")
	}
	srv, err := New(Config{Secret: secret, Cluster: newMemCluster()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(t.Context())
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil {
			t.Fatal("liveness and readiness probes must be HTTP")
		}
		if p.HTTPGet.Port.String() != "manage" {
			t.Errorf("probe %s on port %s, want manage", p.HTTPGet.Path, p.HTTPGet.Port.String())
		}
		if w := get(srv.ManageHandler(), p.HTTPGet.Path); w.Code != http.StatusOK {
			t.Errorf("probe path %s answers %d", p.HTTPGet.Path, w.Code)
		}
		if w := get(srv.Handler(), p.HTTPGet.Path); w.Code != http.StatusNotFound {
			t.Errorf("the webhook's handler answers probe path %s: %d", p.HTTPGet.Path, w.Code)
		}
	}
	if a := d.Spec.Template.Annotations; a["prometheus.io/port"] != "8081" || a["prometheus.io/scrape"] != "true" || a["prometheus.io/path"] != "/metrics" {
		t.Errorf("scrape annotations %v: want /metrics on 8081", a)
	}
}

// The example Ingress routes exactly /webhook, to the Service's webhook port, over TLS, and
// nothing else.
func TestIngress(t *testing.T) {
	objs := deployObjects(t, "ingress.yaml")
	if len(objs) != 1 {
		t.Fatalf("ingress.yaml: %d objects, want one Ingress", len(objs))
	}
	ing, ok := objs[0].(*networkingv1.Ingress)
	if !ok {
		t.Fatalf("ingress.yaml holds a %T", objs[0])
	}
	if ing.Namespace != "af-system" || ing.Spec.DefaultBackend != nil || len(ing.Spec.Rules) != 1 {
		t.Fatalf("ingress %+v: want one rule in af-system, no default backend", ing.Spec)
	}
	r := ing.Spec.Rules[0]
	if len(ing.Spec.TLS) != 1 || ing.Spec.TLS[0].SecretName == "" || !slices.Equal(ing.Spec.TLS[0].Hosts, []string{r.Host}) {
		t.Errorf("TLS %+v: want the rule's host from a Secret", ing.Spec.TLS)
	}
	if r.HTTP == nil || len(r.HTTP.Paths) != 1 {
		t.Fatalf("rule %+v: want one path", r)
	}
	p := r.HTTP.Paths[0]
	if p.Path != "/webhook" || p.PathType == nil || *p.PathType != networkingv1.PathTypeExact {
		t.Errorf("path %s (%v), want /webhook Exact", p.Path, p.PathType)
	}
	if b := p.Backend.Service; b == nil || b.Name != "af-app" || b.Port.Name != "http" {
		t.Errorf("backend %+v, want the Service af-app's port http", p.Backend)
	}
	b, err := os.ReadFile(filepath.Join("..", "deploy", "app", "ingress.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "cert-manager.io/cluster-issuer") {
		t.Error("ingress.yaml should show cert-manager's annotation")
	}
}

// RBAC grants exactly what Environments and Down use (namespaces get, list and delete, cluster
// wide), what Watch uses (the pod af-probe and its log, get, by name) and what the teardown
// journal uses (configmaps in the App's own namespace only).
func TestLeastPrivilege(t *testing.T) {
	var role *rbacv1.ClusterRole
	var binding *rbacv1.ClusterRoleBinding
	roles := map[string]*rbacv1.Role{}
	bindings := map[string]*rbacv1.RoleBinding{} // by the Role they bind
	for _, o := range deployObjects(t, "rbac.yaml") {
		switch v := o.(type) {
		case *rbacv1.ClusterRole:
			role = v
		case *rbacv1.ClusterRoleBinding:
			binding = v
		case *rbacv1.Role:
			roles[v.Name] = v
		case *rbacv1.RoleBinding:
			bindings[v.RoleRef.Name] = v
		}
	}
	if len(roles) != 2 || len(bindings) != 2 {
		t.Fatalf("%d Roles and %d RoleBindings, want the journal's and the leader election's", len(roles), len(bindings))
	}
	jrole, jbinding := roles["af-app-journal"], bindings["af-app-journal"]
	if role == nil || binding == nil || binding.RoleRef.Name != role.Name || binding.Subjects[0].Name != "af-app" {
		t.Fatal("rbac.yaml needs the af-app ClusterRole bound to the af-app ServiceAccount")
	}
	if len(role.Rules) != 2 {
		t.Fatalf("%d rules, want 2", len(role.Rules))
	}
	r := role.Rules[0]
	verbs := slices.Sorted(slices.Values(r.Verbs))
	if !slices.Equal(r.APIGroups, []string{""}) || !slices.Equal(r.Resources, []string{"namespaces"}) || !slices.Equal(verbs, []string{"delete", "get", "list"}) || len(r.ResourceNames) != 0 {
		t.Fatalf("rule %+v", r)
	}
	r = role.Rules[1]
	if !slices.Equal(r.APIGroups, []string{""}) || !slices.Equal(r.Resources, []string{"pods", "pods/log"}) || !slices.Equal(r.Verbs, []string{"get"}) ||
		!slices.Equal(r.ResourceNames, []string{kubernetes.ProbeName}) {
		t.Fatalf("the watch's rule %+v: want get on pods and pods/log named %s only", r, kubernetes.ProbeName)
	}
	if jrole == nil || jbinding == nil || jrole.Namespace != "af-system" || jbinding.Namespace != "af-system" ||
		jbinding.RoleRef.Kind != "Role" || jbinding.RoleRef.Name != jrole.Name || jbinding.Subjects[0].Name != "af-app" {
		t.Fatal("rbac.yaml needs the journal's Role in af-system bound to the af-app ServiceAccount")
	}
	if len(jrole.Rules) != 1 {
		t.Fatalf("journal role: %d rules, want 1", len(jrole.Rules))
	}
	r = jrole.Rules[0]
	verbs = slices.Sorted(slices.Values(r.Verbs))
	if !slices.Equal(r.APIGroups, []string{""}) || !slices.Equal(r.Resources, []string{"configmaps"}) || !slices.Equal(verbs, []string{"create", "delete", "get", "list", "update"}) {
		t.Fatalf("journal rule %+v", r)
	}

	// Leader election: the Lease af-app in af-system, created if missing, then read and
	// renewed; nothing else of leases, and nowhere else.
	lrole, lbinding := roles["af-app-leader"], bindings["af-app-leader"]
	if lrole == nil || lbinding == nil || lrole.Namespace != "af-system" || lbinding.Namespace != "af-system" ||
		lbinding.RoleRef.Kind != "Role" || lbinding.Subjects[0].Name != "af-app" || lbinding.Subjects[0].Namespace != "af-system" {
		t.Fatal("rbac.yaml needs the leader election's Role in af-system bound to the af-app ServiceAccount")
	}
	got := map[string][]string{} // verb → resource names
	for _, r := range lrole.Rules {
		if !slices.Equal(r.APIGroups, []string{"coordination.k8s.io"}) || !slices.Equal(r.Resources, []string{"leases"}) {
			t.Fatalf("leader rule %+v: leases of coordination.k8s.io only", r)
		}
		for _, v := range r.Verbs {
			got[v] = r.ResourceNames
		}
	}
	_, create := got["create"]
	if len(got) != 3 || !create || !slices.Equal(got["get"], []string{"af-app"}) || !slices.Equal(got["update"], []string{"af-app"}) {
		t.Fatalf("leader verbs %v: want create, and get and update of af-app only", got)
	}
}

// The App manifest (GitHub's manifest flow) asks for the permissions the App's calls need, no
// write it does not use, and the pull_request event.
func TestAppManifest(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "deploy", "app", "app-manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Name        string            `json:"name"`
		Hook        map[string]any    `json:"hook_attributes"`
		Permissions map[string]string `json:"default_permissions"`
		Events      []string          `json:"default_events"`
		Public      *bool             `json:"public"`
		Redirect    string            `json:"redirect_url"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"metadata":      "read",  // every App has it
		"pull_requests": "write", // list open pull requests (the reaper); comments on pull requests
		"issues":        "write", // the sticky comment is an issue comment
		"deployments":   "write", // mark pr-<n> inactive
		"checks":        "write", // the "af containment" check run when a watch sees an escape after the start
	}
	if len(m.Permissions) != len(want) {
		t.Fatalf("permissions %v, want %v", m.Permissions, want)
	}
	for k, v := range want {
		if m.Permissions[k] != v {
			t.Errorf("permission %s: %q, want %q", k, m.Permissions[k], v)
		}
	}
	if !slices.Equal(m.Events, []string{"pull_request"}) || m.Hook["url"] == nil || m.Public == nil || *m.Public {
		t.Fatalf("events %v, hook %v, public %v", m.Events, m.Hook, m.Public)
	}
	// The App serves POST /webhook and nothing a browser could land on: the manifest flow's
	// redirect (which carries the code to exchange) goes to the docs that say what to do with it.
	hook, _ := m.Hook["url"].(string)
	if !strings.HasSuffix(hook, "/webhook") {
		t.Errorf("hook url %q: the App's route is /webhook", hook)
	}
	if m.Redirect != "" && (strings.HasPrefix(m.Redirect, strings.TrimSuffix(hook, "webhook")) || !strings.HasPrefix(m.Redirect, "https://github.com/antifailure/af/blob/main/docs/")) {
		t.Errorf("redirect_url %q: a page the App does not serve", m.Redirect)
	}
	doc, err := os.ReadFile(filepath.Join("..", strings.TrimPrefix(m.Redirect, "https://github.com/antifailure/af/blob/main/")))
	if m.Redirect != "" && (err != nil || !strings.Contains(string(doc), "app-manifests/")) {
		t.Errorf("redirect_url %q: the page must exist here and say how to exchange the code (%v)", m.Redirect, err)
	}
}
