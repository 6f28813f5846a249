package conformance

// The suite's environments: each role's manifest, brought up once and shared by the behaviours
// that need it.

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/antifailure/af/manifest"
	"github.com/antifailure/af/runtime"
)

// manifestFor parses a manifest given as a map (JSON is YAML), so defaults apply exactly as
// they do for a user's af.yaml.
func (s *suite) manifestFor(name string, services map[string]any, egress map[string]any, withDomain bool) (*manifest.Manifest, error) {
	rt := map[string]any{"provider": s.rt.Name(), "namespace_prefix": s.opts.NamespacePrefix, "ttl": "1h"}
	if withDomain && s.caps.Ingress {
		rt["domain"] = s.opts.Domain
	}
	doc := map[string]any{"name": name, "runtime": rt, "services": services}
	if egress != nil {
		doc["egress"] = egress
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	res := manifest.Parse(data)
	if !res.Valid() {
		return nil, res.Err(name + ".yaml")
	}
	return res.Manifest, nil
}

// ref names one of the suite's environments.
func (s *suite) ref(role string, m *manifest.Manifest) runtime.Ref {
	return runtime.Ref{ID: s.opts.Prefix + "-" + role, Manifest: m, Repository: "af-conformance/suite"}
}

// up brings an environment up once and remembers the result (and the error), so every
// behaviour that needs it shares one up. A caller that comes while another brings it up waits.
func (s *suite) up(role string, build func() (*manifest.Manifest, error)) *env {
	s.mu.Lock()
	if e, ok := s.envs[role]; ok {
		s.mu.Unlock()
		<-e.done
		return e
	}
	e := &env{done: make(chan struct{})}
	s.envs[role] = e
	s.mu.Unlock()
	defer close(e.done)
	m, err := build()
	e.err = err
	if m != nil {
		e.ref = s.ref(role, m)
	}
	if err != nil {
		return e
	}
	s.mu.Lock()
	s.order = append(s.order, role)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.UpTimeout)
	defer cancel()
	start := time.Now()
	e.res, e.err = s.rt.Up(ctx, runtime.Spec{Ref: e.ref})
	s.logf("up %s: %s (%v)", e.ref.ID, time.Since(start).Round(time.Millisecond), e.err)
	return e
}

// must fails the behaviour when the environment did not come up.
func (e *env) must(t *testing.T) {
	t.Helper()
	if err := e.notUp(); err != nil {
		t.Fatal(err)
	}
}

// made records an environment made outside up (a refused one), for the final down.
func (s *suite) made(role string, e *env) {
	e.done = make(chan struct{})
	close(e.done)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.envs[role] = e
	s.order = append(s.order, role)
}
