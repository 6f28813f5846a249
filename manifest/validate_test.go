package manifest

import (
	"errors"
	"strings"
	"testing"

	"github.com/antifailure/af/failure"
)

// TestCheckDependencies: a manifest built without parsing gets Parse's checks of what its
// services wait for, in Parse's words and with its codes.
func TestCheckDependencies(t *testing.T) {
	svc := func(deps ...string) *Service { return &Service{Image: "app:1", DependsOn: deps} }
	for _, c := range []struct {
		name     string
		services map[string]*Service
		code     *failure.Entry // nil: no problem
		says     string
	}{
		{"none", map[string]*Service{"web": svc("api"), "api": svc()}, nil, ""},
		{"missing", map[string]*Service{"web": svc("apii"), "api": svc()}, failure.DependencyMissing,
			`services.web.depends_on[0]: "apii" is not a service of this manifest; did you mean "api"?`},
		{"itself", map[string]*Service{"web": svc("web")}, failure.DependencyCycle, `service "web" depends on itself`},
		{"cycle", map[string]*Service{"a": svc("b"), "b": svc("a")}, failure.DependencyCycle,
			"services depend on each other in a cycle (depends_on and migrate_after): a -> b -> a"},
		{"twice", map[string]*Service{"web": svc("api", "api"), "api": svc()}, failure.ManifestInvalid, `"api" is listed twice`},
		{"migration waits for itself", map[string]*Service{"web": {Image: "app:1", Migrate: Command{Exec: []string{"m"}}, MigrateAfter: []string{"web"}}},
			failure.DependencyCycle, `the migration of "web" cannot wait for "web" itself`},
	} {
		err := CheckDependencies(c.services)
		if c.code == nil {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if !errors.Is(err, c.code) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: got %v, want %s saying %q", c.name, err, c.code.Code, c.says)
		}
	}
}
