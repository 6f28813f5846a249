package trust

import (
	"reflect"
	"testing"
)

const withEgress = base + `egress:
  default: block
  rules:
    - host: api.allowed.test
      ports: [443]
`

// A pull request's af.yaml that moves the domain, asks for more replicas than the limit and
// opens a host and a cidr the base does not.
const widening = `name: shop
runtime:
  provider: kubernetes
  domain: pr.attacker.test
services:
  web:
    image: registry.acme.test/web:2
    port: 8080
    replicas: 5
egress:
  default: block
  rules:
    - host: api.allowed.test
      ports: [443]
    - host: evil.test
    - cidr: 10.20.0.0/16
`

func TestEffective(t *testing.T) {
	b, pr := parse(t, withEgress), parse(t, widening)
	prBefore := parse(t, widening)
	wide := []string{"host evil.test, every port: allow", "cidr 10.20.0.0/16, every port: allow"}
	for _, c := range []struct {
		name     string
		s        Sources
		domain   string
		replicas int
		rules    int
		registry string
		ignored  int
		widened  []string
		leftOut  []string
	}{
		{"not a pull request: taken as it is", Sources{Manifest: pr}, "pr.attacker.test", 5, 3, "", 0, nil, nil},
		{"not a pull request, the registry input", Sources{Manifest: pr, Registry: "ghcr.io/acme"}, "pr.attacker.test", 5, 3, "ghcr.io/acme", 0, nil, nil},
		{"a pull request, widening not approved", Sources{Manifest: pr, PullRequest: true, Base: b}, "preview.acme.test", 2, 1, "registry.acme.test/previews", 7, wide, wide},
		{"a pull request, widening approved", Sources{Manifest: pr, PullRequest: true, Base: b, EgressApproved: true}, "preview.acme.test", 2, 3, "registry.acme.test/previews", 7, wide, nil},
		{"a pull request, the registry input over the base's", Sources{Manifest: pr, PullRequest: true, Base: b, Registry: "ghcr.io/acme"}, "preview.acme.test", 2, 1, "ghcr.io/acme", 7, wide, wide},
		{"a pull request, no base: the defaults, no egress", Sources{Manifest: pr, PullRequest: true}, "", 3, 0, "", 2, append([]string{"host api.allowed.test, ports 443: allow"}, wide...), append([]string{"host api.allowed.test, ports 443: allow"}, wide...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Effective(c.s)
			m := got.Manifest
			if m.Runtime.Domain != c.domain || m.Services["web"].Replicas != c.replicas || len(m.Egress.Rules) != c.rules || m.Runtime.Registry != c.registry {
				t.Errorf("domain %q replicas %d rules %d registry %q; want %q %d %d %q", m.Runtime.Domain, m.Services["web"].Replicas, len(m.Egress.Rules), m.Runtime.Registry, c.domain, c.replicas, c.rules, c.registry)
			}
			if len(got.Ignored) != c.ignored {
				t.Errorf("ignored %v, want %d", got.Ignored, c.ignored)
			}
			if !reflect.DeepEqual(got.EgressWidened, c.widened) || !reflect.DeepEqual(got.EgressLeftOut, c.leftOut) {
				t.Errorf("widened %q left out %q; want %q and %q", got.EgressWidened, got.EgressLeftOut, c.widened, c.leftOut)
			}
			if m.Services["web"].Image != "registry.acme.test/web:2" {
				t.Errorf("the pull request's image %q, want its own", m.Services["web"].Image)
			}
		})
	}
	if !reflect.DeepEqual(pr, prBefore) {
		t.Errorf("Effective changed its input")
	}
	paths := map[string]bool{}
	for _, i := range Effective(Sources{Manifest: pr, PullRequest: true, Base: b}).Ignored {
		paths[i.Path] = true
	}
	if !paths["runtime.domain"] || !paths["services.web.replicas"] || !paths["database"] {
		t.Errorf("ignored paths %v: want runtime.domain, services.web.replicas and database among them", paths)
	}
}
