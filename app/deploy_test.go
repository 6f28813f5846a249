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
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

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
// root filesystem without capabilities; its probes are paths the App serves; every variable
// it sets is one af reads.
func TestDeployment(t *testing.T) {
	var d *appsv1.Deployment
	var svc *corev1.Service
	for _, o := range deployObjects(t, "deployment.yaml") {
		switch v := o.(type) {
		case *appsv1.Deployment:
			d = v
		case *corev1.Service:
			svc = v
		}
	}
	if d == nil || svc == nil {
		t.Fatal("deployment.yaml needs a Deployment and a Service")
	}
	ps := d.Spec.Template.Spec
	c := ps.Containers[0]
	if c.Image != version.ActionImage || !slices.Equal(c.Args, []string{"app", "serve"}) {
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
	if ps.ServiceAccountName != "af-app" || *d.Spec.Replicas != 1 {
		t.Fatalf("service account %q, %d replicas", ps.ServiceAccountName, *d.Spec.Replicas)
	}
	known := map[string]bool{}
	for _, v := range settings.Vars {
		known[v.Name] = true
	}
	journal := false
	for _, e := range c.Env {
		if !known[e.Name] {
			t.Errorf("the Deployment sets %s, which af does not read", e.Name)
		}
		if e.Name == "AF_APP_NAMESPACE" {
			journal = e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
		}
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
		if w := get(srv.Handler(), p.HTTPGet.Path); w.Code != http.StatusOK {
			t.Errorf("probe path %s answers %d", p.HTTPGet.Path, w.Code)
		}
	}
}

// RBAC grants exactly what Environments and Down use (namespaces get, list and delete, cluster
// wide) and what the teardown journal uses (configmaps in the App's own namespace only).
func TestLeastPrivilege(t *testing.T) {
	var role *rbacv1.ClusterRole
	var binding *rbacv1.ClusterRoleBinding
	var jrole *rbacv1.Role
	var jbinding *rbacv1.RoleBinding
	for _, o := range deployObjects(t, "rbac.yaml") {
		switch v := o.(type) {
		case *rbacv1.ClusterRole:
			role = v
		case *rbacv1.ClusterRoleBinding:
			binding = v
		case *rbacv1.Role:
			jrole = v
		case *rbacv1.RoleBinding:
			jbinding = v
		}
	}
	if role == nil || binding == nil || binding.RoleRef.Name != role.Name || binding.Subjects[0].Name != "af-app" {
		t.Fatal("rbac.yaml needs the af-app ClusterRole bound to the af-app ServiceAccount")
	}
	if len(role.Rules) != 1 {
		t.Fatalf("%d rules, want 1", len(role.Rules))
	}
	r := role.Rules[0]
	verbs := slices.Sorted(slices.Values(r.Verbs))
	if !slices.Equal(r.APIGroups, []string{""}) || !slices.Equal(r.Resources, []string{"namespaces"}) || !slices.Equal(verbs, []string{"delete", "get", "list"}) {
		t.Fatalf("rule %+v", r)
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
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"metadata":      "read",  // every App has it
		"pull_requests": "write", // list open pull requests (the reaper); comments on pull requests
		"issues":        "write", // the sticky comment is an issue comment
		"deployments":   "write", // mark pr-<n> inactive
		"checks":        "read",  // the action's check run, read by reviewers of the App
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
}
