package kubernetes

import (
	"errors"
	"strings"
	"testing"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
)

// TestRefuseDependencies: a manifest built without parsing is refused before anything touches
// the cluster when what its services wait for is wrong, in the manifest's words and codes.
func TestRefuseDependencies(t *testing.T) {
	spec := func(services map[string]*manifest.Service) afruntime.Spec {
		return afruntime.Spec{Ref: afruntime.Ref{ID: "deps", Manifest: &manifest.Manifest{Services: services}}}
	}
	r := &Runtime{}
	for _, c := range []struct {
		name     string
		services map[string]*manifest.Service
		code     *failure.Entry
		says     string
	}{
		{"missing", map[string]*manifest.Service{"a": {DependsOn: []string{"ghost"}}}, failure.DependencyMissing,
			`services.a.depends_on[0]: "ghost" is not a service of this manifest`},
		{"itself", map[string]*manifest.Service{"a": {DependsOn: []string{"a"}}}, failure.DependencyCycle,
			`service "a" depends on itself`},
		{"cycle", map[string]*manifest.Service{"a": {DependsOn: []string{"b"}}, "b": {DependsOn: []string{"a"}}}, failure.DependencyCycle,
			"in a cycle (depends_on and migrate_after): a -> b -> a"},
	} {
		err := r.refuse(spec(c.services))
		if !errors.Is(err, c.code) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: got %v, want %s saying %q", c.name, err, c.code.Code, c.says)
		}
	}
	if err := r.refuse(spec(map[string]*manifest.Service{"a": {DependsOn: []string{"b"}}, "b": {}})); err != nil {
		t.Errorf("a manifest whose services wait for each other in order is refused: %v", err)
	}
}
