package benchup

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/antifailure/af/manifest"
)

func loadManifest(t *testing.T, path string) *manifest.Manifest {
	t.Helper()
	res, err := manifest.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Err(path); err != nil {
		t.Fatal(err)
	}
	return res.Manifest
}

// TestBaselineOfTheExample: the example's plain objects say what its manifest says, and its
// steps are af's order: worker and web's migration, then web.
func TestBaselineOfTheExample(t *testing.T) {
	m := loadManifest(t, "../../examples/shop/af.yaml")
	b, err := NewBaseline(m, "ns", map[string]string{"web": "web:1", "worker": "worker:1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.DeploymentNames(); !slices.Equal(got, []string{"worker", "web"}) {
		t.Fatalf("deployments %v", got)
	}
	if b.Pods != 3 {
		t.Errorf("pods %d, want 3", b.Pods)
	}
	worker, web := b.Deployments[0], b.Deployments[1]
	if *worker.Spec.Replicas != 2 || *web.Spec.Replicas != 1 {
		t.Errorf("replicas: worker %d, web %d", *worker.Spec.Replicas, *web.Spec.Replicas)
	}
	wc, ww := worker.Spec.Template.Spec.Containers[0], web.Spec.Template.Spec.Containers[0]
	if wc.Image != "worker:1" || ww.Image != "web:1" {
		t.Errorf("images %s, %s", wc.Image, ww.Image)
	}
	if p := wc.ReadinessProbe; p == nil || p.TCPSocket == nil || p.TCPSocket.Port.IntVal != 8080 {
		t.Errorf("worker's readiness: %+v", p)
	}
	if p := ww.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.IntVal != 8080 {
		t.Errorf("web's readiness: %+v", p)
	}
	env := map[string]string{}
	for _, e := range ww.Env {
		env[e.Name] = e.Value
	}
	if env["WORKER_URL"] != "http://worker:8080" || len(env) != len(m.Services["web"].Env) {
		t.Errorf("web's env %v", env)
	}
	for _, c := range []corev1.Container{wc, ww} {
		if c.Resources.Limits.Cpu().String() != "100m" || c.Resources.Requests.Memory().String() != "64Mi" {
			t.Errorf("%s's size %v", c.Name, c.Resources)
		}
		if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 8080 {
			t.Errorf("%s's ports %v", c.Name, c.Ports)
		}
	}
	if len(b.Services) != 2 {
		t.Errorf("services %d", len(b.Services))
	}
	if len(b.Jobs) != 1 {
		t.Fatalf("jobs %d", len(b.Jobs))
	}
	job := b.Jobs[0].Spec.Template.Spec
	if c := job.Containers[0]; !slices.Equal(c.Command, []string{"/shop-web", "migrate"}) || c.Image != "web:1" || job.RestartPolicy != corev1.RestartPolicyNever || *b.Jobs[0].Spec.BackoffLimit != 0 {
		t.Errorf("migration %+v", b.Jobs[0].Spec)
	}
	type step struct{ deployments, jobs []string }
	var steps []step
	for _, s := range b.Steps {
		steps = append(steps, step{s.Deployments, s.Jobs})
	}
	want := []step{{[]string{"worker"}, []string{"web-migrate"}}, {[]string{"web"}, nil}}
	if len(steps) != 2 || !slices.Equal(steps[0].deployments, want[0].deployments) || !slices.Equal(steps[0].jobs, want[0].jobs) ||
		!slices.Equal(steps[1].deployments, want[1].deployments) || len(steps[1].jobs) != 0 {
		t.Errorf("steps %v, want %v", steps, want)
	}
	if len(b.Steps[0].Objects) != 3 || len(b.Steps[1].Objects) != 2 {
		t.Errorf("objects per step: %d, %d", len(b.Steps[0].Objects), len(b.Steps[1].Objects))
	}
	data, err := List(b.Plain())
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Kind  string
		Items []struct{ Kind, APIVersion string }
	}
	if err := json.Unmarshal(data, &list); err != nil || list.Kind != "List" || len(list.Items) != 4 {
		t.Fatalf("list %s: %v", data, err)
	}
	for _, it := range list.Items {
		if it.Kind == "" || it.APIVersion == "" {
			t.Errorf("an item without its kind: %s", data)
		}
	}
}

// TestBaselineOrder: a migration with migrate_after runs after those services; a service
// waits for its dependencies and its migration.
func TestBaselineOrder(t *testing.T) {
	res := manifest.Parse([]byte(`
name: order
runtime: {provider: kubernetes}
services:
  db: {image: db:1, port: 5432}
  api:
    image: api:1
    port: 8080
    migrate: ["migrate"]
    migrate_after: [db]
  cron:
    image: cron:1
    kind: cron
    schedule: "@hourly"
    command: echo hi
    depends_on: [api]
`))
	if err := res.Err("order"); err != nil {
		t.Fatal(err)
	}
	b, err := NewBaseline(res.Manifest, "ns", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range b.Steps {
		got = append(got, strings.Join(append(s.Deployments, s.Jobs...), ","))
	}
	if want := []string{"db", "api-migrate", "api", "cron"}; !slices.Equal(got, want) {
		t.Errorf("steps %q, want %q", got, want)
	}
	if len(b.Services) != 2 {
		t.Errorf("services %d: only the ones that listen", len(b.Services))
	}
	if c := b.Deployments[len(b.Deployments)-1].Spec.Template.Spec.Containers[0]; !slices.Equal(c.Command, []string{"/bin/sh", "-c", "echo hi"}) || c.ReadinessProbe != nil {
		t.Errorf("cron's container %+v", c)
	}
	if _, err := NewBaseline(loadManifest(t, "../../examples/shop/af.yaml"), "ns", map[string]string{"web": "web:1"}); err == nil || !strings.Contains(err.Error(), "worker") {
		t.Errorf("a built service without an image: %v", err)
	}
}
