package conformance

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/manifest"
	"github.com/antifailure/af/runtime"
)

// The suite's environments, by role.
const (
	roleMain    = "main"    // store and api (api depends on store), the allow rule
	roleOther   = "other"   // one service, no egress rules
	roleMigrate = "migrate" // a service whose migration fails
	roleCrash   = "crash"   // a service that exits 3
)

// memoryAsked is the memory the main environment's api asks for, and its size in bytes.
const (
	cpuAsked         = "50m"
	memoryAsked      = "32Mi"
	memoryAskedBytes = "33554432"
	apiReplicas      = 2
)

// behaviours maps every roster behaviour to its implementation.
func behaviours() map[string]func(*testing.T, *suite) {
	return map[string]func(*testing.T, *suite){
		"capabilities/identity":                   identity,
		"up/refuses-no-environment-id":            refusesNoID,
		"up/starts-a-service":                     startsAService,
		"up/reachable-url":                        reachableURL,
		"up/idempotent":                           upIdempotent,
		"up/dependencies-first":                   dependenciesFirst,
		"up/cycle-reported":                       cycleReported,
		"up/missing-dependency-reported":          missingDependency,
		"up/failed-migration-blocks-service":      failedMigration,
		"up/failed-service-findable":              failedServiceFindable,
		"up/instances-asked":                      instancesAsked,
		"up/size-applied":                         sizeApplied,
		"capabilities/declared-match-implemented": declaredMatch,
		"status/running-services":                 statusRunning,
		"status/exit-code":                        statusExitCode,
		"status/unknown-environment-empty":        statusUnknown,
		"inventory/lists-and-attributes":          inventoryAttributes,
		"egress/no-policy-nothing-out":            noPolicyNothingOut,
		"egress/allowed-host-reached":             allowedHostReached,
		"egress/unlisted-host-refused":            unlistedRefused,
		"egress/proxy-ignoring-client":            proxyIgnoring,
		"egress/no-bypass-by-address":             noBypassByAddress,
		"egress/no-metadata":                      noMetadata,
		"egress/no-bypass-by-udp":                 noBypassByUDP,
		"egress/names-do-not-cross":               namesDoNotCross,
		"egress/no-api-server":                    noAPIServer,
		"egress/no-token":                         noToken,
		"egress/no-bypass-by-ipv6-link-local":     noBypassByLinkLocal,
		"egress/no-node-access":                   noNodeAccess,
		"observe/blocked-host-logged":             blockedHostLogged,
		"observe/allowed-host-logged":             allowedHostLogged,
		"observe/capture-in-inbox":                captureInInbox,
		"observe/logs-of-a-service":               logsOfAService,
		"observe/logs-of-a-crashed-service":       logsOfACrashedService,
		"observe/webhook-reaches-service":         webhookReachesService,
		"down/removes-everything":                 downRemovesEverything,
		"down/never-up-succeeds":                  downNeverUp,
		"down/idempotent":                         downIdempotent,
		"down/only-its-own":                       downOnlyItsOwn,
	}
}

// ---- the environments ----

// httpdStoppedOnTERM runs busybox httpd under a shell that stops it on SIGTERM. Run as the
// container's first process with exec, httpd ignores SIGTERM (it has no handler, and a PID 1
// without one gets no default action), so every delete waited out the 30-second grace period.
func httpdStoppedOnTERM(args string) string {
	return "busybox httpd -f " + args + " & trap 'kill $!; exit 0' TERM; wait"
}

func serveTCP() []string { return []string{"aftool", "serve", "-tcp", ":8080", "-udp", ""} }

// main: store serves TCP; api waits for nothing itself but checks, as its first act, that
// store answers (so it shows it started after store was ready), then serves HTTP. api asks
// for the replicas, size and migration the runtime declares it can do.
func (s *suite) main() *env {
	return s.up(roleMain, func() (*manifest.Manifest, error) {
		api := map[string]any{
			"image": s.opts.Image, "port": 8080, "depends_on": []string{"store"},
			"command": "if aftool tcp -timeout 3s store:8080 >/dev/null 2>&1; then echo 'DEPENDENCY store answered'; " +
				"else echo 'DEPENDENCY store did not answer'; exit 9; fi; " +
				"mkdir -p /tmp/www && echo ok > /tmp/www/index.html && " + httpdStoppedOnTERM("-p 8080 -h /tmp/www"),
		}
		if s.caps.Replicas {
			api["replicas"] = apiReplicas
		}
		if s.caps.Resources {
			api["resources"] = map[string]any{"cpu": cpuAsked, "memory": memoryAsked}
		}
		if s.caps.Migrations {
			api["migrate"] = "echo migrated"
		}
		return s.manifestFor("conformance", map[string]any{
			"store": map[string]any{"kind": "worker", "image": s.opts.Image, "port": 8080, "command": serveTCP()},
			"api":   api,
		}, map[string]any{"default": "block", "rules": []any{map[string]any{"host": s.opts.Targets.AllowedHost, "ports": []int{80}}}}, true)
	})
}

func (s *suite) other() *env {
	return s.up(roleOther, func() (*manifest.Manifest, error) {
		return s.manifestFor("conformance-other", map[string]any{
			"lonely": map[string]any{"kind": "worker", "image": s.opts.Image, "port": 8080, "command": serveTCP()},
		}, nil, false)
	})
}

func (s *suite) failingMigration() *env {
	return s.up(roleMigrate, func() (*manifest.Manifest, error) {
		return s.manifestFor("conformance-migrate", map[string]any{
			"app": map[string]any{"image": s.opts.Image, "port": 8080, "command": serveTCP(),
				"migrate": "echo migrating; echo the schema is broken; exit 7"},
		}, nil, false)
	})
}

func (s *suite) crashing() *env {
	return s.up(roleCrash, func() (*manifest.Manifest, error) {
		return s.manifestFor("conformance-crash", map[string]any{
			"crasher": map[string]any{"image": s.opts.Image, "port": 8080, "command": "echo about to fail; exit 3"},
		}, nil, false)
	})
}

// ---- helpers ----

func (s *suite) context(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.UpTimeout)
	t.Cleanup(cancel)
	return ctx
}

func (s *suite) status(t *testing.T, ref runtime.Ref) *runtime.Status {
	t.Helper()
	st, err := s.rt.Status(s.context(t), ref)
	if err != nil {
		t.Fatalf("status %s: %v", ref.ID, err)
	}
	return st
}

func service(st *runtime.Status, name string) *runtime.ServiceStatus {
	for i := range st.Services {
		if st.Services[i].Name == name {
			return &st.Services[i]
		}
	}
	return nil
}

// inventory returns the resource keys attributed to the environment id ("" for every
// environment of the suite's own: other tenants of the cluster, other tests among them, may
// come and go meanwhile).
func (s *suite) inventory(t *testing.T, id string) []string {
	t.Helper()
	inv, err := s.rt.Inventory(s.context(t))
	if err != nil {
		t.Fatalf("inventory: %v", err)
	}
	var out []string
	for _, r := range inv {
		if (id == "" && s.ours(r)) || (id != "" && r.Environment == id) {
			out = append(out, key(r))
		}
	}
	sort.Strings(out)
	return out
}

func (s *suite) instances(t *testing.T, ref runtime.Ref) []Instance {
	t.Helper()
	in, err := s.h.Instances(s.context(t), ref)
	if err != nil {
		t.Fatalf("instances of %s: %v", ref.ID, err)
	}
	return in
}

func names(in []Instance, keep func(Instance) bool) []string {
	var out []string
	for _, i := range in {
		if keep(i) {
			out = append(out, i.Name)
		}
	}
	sort.Strings(out)
	return out
}

// refused ups an environment that must be refused, and checks it was refused promptly and
// that nothing of it exists afterwards.
func (s *suite) refused(t *testing.T, role string, m *manifest.Manifest, mention ...string) error {
	t.Helper()
	ref := s.ref(role, m)
	s.made(role, &env{ref: ref})
	ctx, cancel := context.WithTimeout(s.ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	_, err := s.rt.Up(ctx, runtime.Spec{Ref: ref})
	took := time.Since(start)
	if err == nil {
		t.Fatalf("up %s succeeded; it must be refused", ref.ID)
	}
	if ctx.Err() != nil {
		t.Fatalf("up %s was still waiting after %s: it must be refused, not waited on (%v)", ref.ID, took.Round(time.Millisecond), err)
	}
	t.Logf("refused after %s: %v", took.Round(time.Millisecond), err)
	for _, word := range mention {
		if !strings.Contains(err.Error(), word) {
			t.Errorf("the refusal does not name %q: %v", word, err)
		}
	}
	if left := s.inventory(t, ref.ID); len(left) > 0 {
		t.Errorf("a refused up left resources: %v", left)
	}
	return err
}
