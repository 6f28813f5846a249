package trust

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/antifailure/af/manifest"
)

const base = `name: shop
runtime:
  provider: kubernetes
  namespace_prefix: af-env-
  domain: preview.acme.test
  registry: registry.acme.test/previews
  ttl: 72h
services:
  web:
    image: registry.acme.test/web:1
    port: 8080
database:
  provider: url
  url_from: PREVIEW_DATABASE_URL
github:
  fork_policy: label
limits:
  replicas: 2
  cpu: 500m
  memory: 512Mi
`

func parse(t *testing.T, doc string) *manifest.Manifest {
	t.Helper()
	res := manifest.Parse([]byte(doc))
	if !res.Valid() {
		t.Fatalf("problems: %v\n%s", res.Problems, doc)
	}
	return res.Manifest
}

// Each base-only field a pull request changes is ignored, named, and the base branch's value
// is what runs.
func TestBaseOnlyFieldsIgnored(t *testing.T) {
	cases := []struct {
		name, from, to, path string
		got                  func(m *manifest.Manifest) any
		want                 any
	}{
		{"domain", "domain: preview.acme.test", "domain: prod.acme.test", "runtime.domain", func(m *manifest.Manifest) any { return m.Runtime.Domain }, "preview.acme.test"},
		{"registry", "registry: registry.acme.test/previews", "registry: 127.0.0.1:9/steal", "runtime.registry", func(m *manifest.Manifest) any { return m.Runtime.Registry }, "registry.acme.test/previews"},
		{"namespace prefix", "namespace_prefix: af-env-", "namespace_prefix: kube-", "runtime.namespace_prefix", func(m *manifest.Manifest) any { return m.Runtime.NamespacePrefix }, "af-env-"},
		{"ttl", "ttl: 72h", "ttl: 90d", "runtime.ttl", func(m *manifest.Manifest) any { return m.Runtime.TTL }, parse(t, base).Runtime.TTL},
		{"ingress class", "  ttl: 72h\n", "  ttl: 72h\n  ingress_class: production\n", "runtime.ingress_class", func(m *manifest.Manifest) any { return m.Runtime.IngressClass }, ""},
		{"kube context", "  ttl: 72h\n", "  ttl: 72h\n  kubeconfig_context: prod\n", "runtime.kubeconfig_context", func(m *manifest.Manifest) any { return m.Runtime.KubeconfigContext }, ""},
		{"url_from", "url_from: PREVIEW_DATABASE_URL", "url_from: INPUT_KUBECONFIG", "database", func(m *manifest.Manifest) any { return m.Database.URLFrom }, "PREVIEW_DATABASE_URL"},
		{"fork policy", "fork_policy: label", "fork_policy: always", "github.fork_policy", func(m *manifest.Manifest) any { return m.GitHub.ForkPolicy }, "label"},
		{"limits", "replicas: 2\n  cpu", "replicas: 20\n  cpu", "limits.replicas", func(m *manifest.Manifest) any { return m.Limits.Replicas }, 2},
		{"name", "name: shop", "name: other", "name", func(m *manifest.Manifest) any { return m.Name }, "shop"},
	}
	b := parse(t, base)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(base, c.from) {
				t.Fatalf("the base has no %q", c.from)
			}
			pr := parse(t, strings.Replace(base, c.from, c.to, 1))
			got, ignored := Apply(b, pr)
			if v := c.got(got); !reflect.DeepEqual(v, c.want) {
				t.Errorf("runs with %v, want the base branch's %v", v, c.want)
			}
			if len(ignored) != 1 || ignored[0].Path != c.path || !strings.Contains(ignored[0].Why, "default branch") {
				t.Errorf("ignored %v, want one at %s", ignored, c.path)
			}
			if v := c.got(pr); reflect.DeepEqual(v, c.want) && c.name != "ingress class" && c.name != "kube context" {
				t.Errorf("Apply changed the pull request's manifest: %v", v)
			}
		})
	}
	if got, ignored := Apply(b, parse(t, base)); len(ignored) != 0 || !reflect.DeepEqual(got, b) {
		t.Errorf("an unchanged manifest: ignored %v", ignored)
	}
}

// Replicas, cpu and memory above the base branch's ceilings run at the ceiling; below, as
// asked.
func TestCeilings(t *testing.T) {
	b := parse(t, base)
	pr := parse(t, strings.Replace(base, "    port: 8080\n", "    port: 8080\n    replicas: 20\n    resources: {cpu: \"64\", memory: 256Gi}\n  worker:\n    image: registry.acme.test/worker:1\n    replicas: 2\n    resources: {cpu: 250m, memory: 128Mi}\n", 1))
	got, ignored := Apply(b, pr)
	web, worker := got.Services["web"], got.Services["worker"]
	if web.Replicas != 2 || web.Resources.CPU != "500m" || web.Resources.Memory != "512Mi" {
		t.Errorf("web runs %d × %s/%s, want 2 × 500m/512Mi", web.Replicas, web.Resources.CPU, web.Resources.Memory)
	}
	if worker.Replicas != 2 || worker.Resources.CPU != "250m" || worker.Resources.Memory != "128Mi" {
		t.Errorf("worker runs %d × %s/%s, want it as asked", worker.Replicas, worker.Resources.CPU, worker.Resources.Memory)
	}
	var paths []string
	for _, i := range ignored {
		paths = append(paths, i.Path)
	}
	if want := []string{"services.web.replicas", "services.web.resources.cpu", "services.web.resources.memory"}; !slices.Equal(paths, want) {
		t.Errorf("ignored %v, want %v", ignored, want)
	}
	if pr.Services["web"].Replicas != 20 || pr.Services["web"].Resources.CPU != "64" {
		t.Error("Apply changed the pull request's services")
	}
}

// Without a base manifest the defaults rule: no domain, no database, the default ceilings.
func TestNoBase(t *testing.T) {
	pr := parse(t, strings.Replace(base, "replicas: 2\n", "replicas: 9\n", 1))
	got, ignored := Apply(nil, pr)
	if got.Runtime.Domain != "" || got.Database != nil || got.Runtime.Registry != "" || got.Limits.Replicas != 3 || got.Runtime.Provider != "kubernetes" || got.Name != "shop" {
		t.Errorf("without a base: %+v %+v %+v", got.Runtime, got.Database, got.Limits)
	}
	if len(ignored) == 0 {
		t.Error("nothing listed as ignored")
	}
}

// Every top-level field of the manifest is either base-only or taken from the pull request: a
// new field must be placed.
func TestEveryFieldPlaced(t *testing.T) {
	placed := slices.Clone(fromPullRequest)
	for _, f := range baseOnly {
		placed = append(placed, f.path)
	}
	tp := reflect.TypeFor[manifest.Manifest]()
	for i := range tp.NumField() {
		name, _, _ := strings.Cut(tp.Field(i).Tag.Get("json"), ",")
		if !slices.Contains(placed, name) {
			t.Errorf("manifest field %s is neither base-only nor from the pull request", name)
		}
	}
}
