package conformance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/conformance/verdict"
	"github.com/antifailure/af/manifest"
)

// The lines every instance of the startup proof prints about its first act.
const (
	routeDenied  = "ROUTE udp-resolver DENIED"
	routeEscaped = "ROUTE udp-resolver ESCAPED"
	proofWorkers = 3
)

// firstAct is the shell the startup proof's instances run before anything else: three
// quick tries of the public resolver over UDP, reported as one line.
func firstAct(tg Targets) string {
	try := fmt.Sprintf("aftool dns -timeout 1s -server %s %s >/dev/null 2>&1", tg.Resolver, tg.ResolverName)
	return fmt.Sprintf("if %s || %s || %s; then echo '%s'; else echo '%s'; fi", try, try, try, routeEscaped, routeDenied)
}

// RunStartupProof is the immediate-startup proof, run as the test named verdict.StartupProof: with
// egress allowed by default, a worker of several instances and a migration whose FIRST act
// is to try the public resolver over UDP must all be gated (every gate exits 0), and every
// one of them must log the route DENIED and none ESCAPED; an instance removed is replaced,
// gated the same way. First, an uncontained control proves the resolver answers, or DENIED
// would prove nothing. Nothing can skip it.
func RunStartupProof(t *testing.T, factory Factory, opts Options) {
	t.Helper()
	if t.Name() != verdict.StartupProof {
		t.Fatalf("RunStartupProof runs as %s, not %s", t.Name(), verdict.StartupProof)
	}
	if opts.Prefix == "" {
		opts.Prefix = "proof"
	}
	if opts.NamespacePrefix == "" {
		opts.NamespacePrefix = "af-proof-"
	}
	opts.defaults()
	if m := opts.missing(); len(m) > 0 {
		t.Fatalf("conformance options missing: %s", strings.Join(m, ", "))
	}
	subject := factory(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*opts.UpTimeout)
	defer cancel()
	s := &suite{rt: subject.Runtime, h: subject.Harness, opts: opts, caps: subject.Runtime.Capabilities(), ctx: ctx,
		logf: t.Logf, envs: map[string]*env{}, memo: map[string]*tried{}, downed: map[string]bool{}}
	before, err := s.rt.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.finish(t, before)
	tg := opts.Targets

	// The uncontained control.
	ctl := s.try("outside", s.h.TryOutside, []Attempt{{Name: "udp", Kind: DNS, Target: tg.ResolverName, Server: tg.Resolver}})
	if _, o := ctl.get(t, "udp"); !o.OK {
		t.Fatalf("%s control: the resolver %s does not answer an instance outside every environment (%q): a DENIED inside would prove nothing", verdict.Broken, tg.Resolver, o.Output)
	}

	if !s.caps.Migrations {
		t.Logf("the runtime declares no migrations: the proof covers the workers only")
	}
	workers := proofWorkers
	if !s.caps.Replicas {
		workers = 1
	}
	worker := map[string]any{"kind": "worker", "image": opts.Image, "replicas": workers,
		"command": firstAct(tg) + "; exec aftool serve -tcp :8080 -udp ''"}
	if workers == 1 {
		delete(worker, "replicas")
	}
	if s.caps.Migrations {
		worker["migrate"] = firstAct(tg) + "; echo migration done"
	}
	e := s.up("startup", func() (*manifest.Manifest, error) {
		return s.manifestFor("conformance-startup", map[string]any{"burst": worker}, map[string]any{"default": "allow"}, false)
	})
	if e.err != nil {
		t.Fatalf("%s up: %v", verdict.Broken, e.err)
	}

	check := func(in Instance) {
		t.Helper()
		switch {
		case !in.Gated:
			t.Errorf("%s ran without a gate", in.Name)
		case in.GateExitCode == nil || *in.GateExitCode != 0:
			t.Errorf("%s %s: the gate did not exit 0 (%v)", verdict.Broken, in.Name, in.GateExitCode)
		}
		switch {
		case strings.Contains(in.Log, routeEscaped):
			t.Errorf("%s %s logged %q", verdict.Escape, in.Name, in.Log)
		case !strings.Contains(in.Log, routeDenied):
			t.Errorf("%s unmeasured: %s logged %q", verdict.Broken, in.Name, in.Log)
		default:
			t.Logf("%s (migration %v): gate exit 0, %s", in.Name, in.Migration, routeDenied)
		}
	}
	// Ready is not reported: the first act takes up to three seconds to print its line.
	all := s.instances(t, e.ref)
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); {
		reported := 0
		for _, in := range all {
			if strings.Contains(in.Log, "ROUTE ") {
				reported++
			}
		}
		if reported == len(all) {
			break
		}
		time.Sleep(time.Second)
		all = s.instances(t, e.ref)
	}
	var live []string
	migrations := 0
	for _, in := range all {
		check(in)
		if in.Migration {
			migrations++
		} else {
			live = append(live, in.Name)
		}
	}
	if len(live) != workers {
		t.Errorf("%s %d worker instances, want %d", verdict.Broken, len(live), workers)
	}
	if s.caps.Migrations && migrations != 1 {
		t.Errorf("%s %d migration instances, want 1", verdict.Broken, migrations)
	}
	if len(live) == 0 {
		t.FailNow()
	}

	// A replacement is gated the same way.
	gone := live[0]
	if err := s.h.Remove(ctx, e.ref, gone); err != nil {
		t.Fatalf("%s removing %s: %v", verdict.Broken, gone, err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var fresh *Instance
		for _, in := range s.instances(t, e.ref) {
			if !in.Migration && !slices.Contains(live, in.Name) && in.Ready && strings.Contains(in.Log, "ROUTE ") {
				fresh = &in
				break
			}
		}
		if fresh != nil {
			t.Logf("replacement for %s: %s", gone, fresh.Name)
			check(*fresh)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s no ready replacement for %s within 3m", verdict.Broken, gone)
		}
		time.Sleep(time.Second)
	}
	if err := s.rt.Down(ctx, e.ref); err != nil {
		t.Errorf("down: %v", err)
	}
	s.downed["startup"] = true
}
