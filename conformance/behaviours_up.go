package conformance

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/conformance/verdict"
	"github.com/antifailure/af/runtime"
)

// ---- capabilities ----

func identity(t *testing.T, s *suite) {
	name := s.rt.Name()
	if name == "" {
		t.Fatal("the runtime has no name")
	}
	if _, err := s.manifestFor("identity", map[string]any{"s": map[string]any{"image": s.opts.Image}}, nil, false); err != nil {
		t.Errorf("a manifest naming provider %q is not valid: %v", name, err)
	}
}

func declaredMatch(t *testing.T, s *suite) {
	e := s.main()
	e.must(t)
	st := s.status(t, e.ref)
	api := service(st, "api")
	if api == nil {
		t.Fatalf("status has no api: %+v", st.Services)
	}
	type evidence struct {
		req      verdict.Requirement
		declared bool
		shown    bool
		what     string
	}
	var migrated bool
	for _, i := range s.instances(t, e.ref) {
		if i.Migration && i.Service == "api" && strings.Contains(i.Log, "migrated") {
			migrated = true
		}
	}
	for _, ev := range []evidence{
		{verdict.Ingress, s.caps.Ingress, e.res != nil && e.res.URLs["api"] != "", "a preview URL for the web service"},
		{verdict.Replicas, s.caps.Replicas, api.Desired == apiReplicas, fmt.Sprintf("%d instances of api", apiReplicas)},
		{verdict.Resources, s.caps.Resources, api.Memory == memoryAsked && api.CPU == cpuAsked, "api sized " + cpuAsked + "/" + memoryAsked},
		{verdict.Migrations, s.caps.Migrations, migrated, "api's migration ran"},
		{verdict.NetLog, s.caps.NetLog, isObserver(s.rt), "a runtime.Observer"},
	} {
		switch {
		case ev.declared && !ev.shown:
			t.Errorf("the runtime declares %s but the main environment does not show %s", ev.req, ev.what)
		case !ev.declared && ev.shown:
			t.Errorf("the runtime does not declare %s but shows %s", ev.req, ev.what)
		case ev.declared:
			t.Logf("%s: declared, and shown (%s)", ev.req, ev.what)
		}
	}
	// What is not declared must be refused, not silently dropped.
	undeclared := map[string]any{}
	if !s.caps.Replicas {
		undeclared["replicas"] = 2
	}
	if !s.caps.Resources {
		undeclared["resources"] = map[string]any{"memory": memoryAsked}
	}
	if !s.caps.Migrations {
		undeclared["migrate"] = "echo migrated"
	}
	for field, v := range undeclared {
		svc := map[string]any{"image": s.opts.Image, "port": 8080, "command": serveTCP(), field: v}
		m, err := s.manifestFor("conformance-undeclared", map[string]any{"app": svc}, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(field, func(t *testing.T) { s.refused(t, "undeclared-"+field, m, field) })
	}
}

// ---- up ----

func refusesNoID(t *testing.T, s *suite) {
	m, err := s.manifestFor("conformance-noid", map[string]any{"s": map[string]any{"image": s.opts.Image, "command": serveTCP()}}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	s.leavesInventory(t, "up without an environment id", func() error {
		_, err := s.rt.Up(s.context(t), runtime.Spec{Ref: runtime.Ref{ID: "", Manifest: m}})
		return err
	}, true)
}

func startsAService(t *testing.T, s *suite) {
	e := s.main()
	e.must(t)
	for _, name := range []string{"store", "api"} {
		var found *runtime.ServiceStatus
		for i := range e.res.Services {
			if e.res.Services[i].Name == name {
				found = &e.res.Services[i]
			}
		}
		if found == nil || found.State != runtime.StateRunning || found.Ready < 1 || found.Ready != found.Desired {
			t.Errorf("up's result for %s: %+v", name, found)
		}
	}
	ready := names(s.instances(t, e.ref), func(i Instance) bool { return i.Service == "store" && !i.Migration && i.Ready })
	if len(ready) != 1 {
		t.Errorf("store has %d ready instance(s), want 1: %v", len(ready), ready)
	}
}

func reachableURL(t *testing.T, s *suite) {
	e := s.main()
	e.must(t)
	u := e.res.URLs["api"]
	if u == "" {
		t.Fatalf("no preview URL for api: %v", e.res.URLs)
	}
	if _, ok := e.res.URLs["store"]; ok {
		t.Errorf("a worker got a preview URL: %v", e.res.URLs)
	}
	var code int
	var body string
	var err error
	for range 10 {
		code, body, err = s.h.Fetch(s.context(t), u)
		if err == nil && code == 200 {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil || code != 200 || strings.TrimSpace(body) != "ok" {
		t.Errorf("GET %s: %d %q %v", u, code, body, err)
	}
}

func upIdempotent(t *testing.T, s *suite) {
	e := s.main()
	e.must(t)
	inv := s.inventory(t, e.ref.ID)
	keep := func(i Instance) bool { return true }
	inst := names(s.instances(t, e.ref), keep)
	start := time.Now()
	res, err := s.rt.Up(s.context(t), runtime.Spec{Ref: e.ref})
	if err != nil {
		t.Fatalf("second up: %v", err)
	}
	t.Logf("second up converged in %s", time.Since(start).Round(time.Millisecond))
	if got := s.inventory(t, e.ref.ID); !slices.Equal(inv, got) {
		t.Errorf("the second up changed the resources:\nbefore %v\nafter  %v", inv, got)
	}
	if got := names(s.instances(t, e.ref), keep); !slices.Equal(inst, got) {
		t.Errorf("the second up replaced instances:\nbefore %v\nafter  %v", inst, got)
	}
	if len(res.Services) != len(e.res.Services) {
		t.Errorf("the second up reports %d services, the first %d", len(res.Services), len(e.res.Services))
	}
}

func dependenciesFirst(t *testing.T, s *suite) {
	e := s.main()
	e.must(t)
	n := 0
	for _, i := range s.instances(t, e.ref) {
		if i.Service != "api" || i.Migration {
			continue
		}
		n++
		if !strings.Contains(i.Log, "DEPENDENCY store answered") || strings.Contains(i.Log, "did not answer") {
			t.Errorf("api instance %s started before store answered: %q", i.Name, i.Log)
		}
	}
	if n == 0 {
		t.Fatal("no api instance to look at")
	}
}

func cycleReported(t *testing.T, s *suite) {
	m, err := s.manifestFor("conformance-cycle", map[string]any{
		"a": map[string]any{"image": s.opts.Image, "command": serveTCP()},
		"b": map[string]any{"image": s.opts.Image, "command": serveTCP()},
	}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	// The parser refuses a cycle; the runtime must too, for callers that build manifests.
	m.Services["a"].DependsOn = []string{"b"}
	m.Services["b"].DependsOn = []string{"a"}
	// The catalogue's code and the cycle's path, whichever service it starts from.
	err = s.refused(t, "cycle", m, "AF-RUN-041")
	if err != nil && !strings.Contains(err.Error(), "a -> b -> a") && !strings.Contains(err.Error(), "b -> a -> b") {
		t.Errorf("the refusal does not give the cycle's path (a -> b -> a): %v", err)
	}
}

func missingDependency(t *testing.T, s *suite) {
	m, err := s.manifestFor("conformance-missing", map[string]any{
		"a": map[string]any{"image": s.opts.Image, "command": serveTCP()},
	}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	m.Services["a"].DependsOn = []string{"ghost"}
	s.refused(t, "missing", m, "AF-RUN-042", "ghost")
}

func failedMigration(t *testing.T, s *suite) {
	e := s.failingMigration()
	if e.err == nil {
		t.Fatal("up succeeded although the migration exits 7")
	}
	t.Logf("up failed: %v", e.err)
	var migration bool
	for _, i := range s.instances(t, e.ref) {
		if i.Service == "app" && !i.Migration && (i.Started || i.Ready) {
			t.Errorf("instance %s of app started although its migration failed", i.Name)
		}
		if i.Migration && strings.Contains(i.Log, "the schema is broken") {
			migration = true
		}
	}
	if !migration {
		t.Error("the failed migration's instance and output are not findable")
	}
	if app := service(s.status(t, e.ref), "app"); app != nil && app.Ready > 0 {
		t.Errorf("status shows app ready: %+v", app)
	}
}

func failedServiceFindable(t *testing.T, s *suite) {
	e := s.crashing()
	if e.err == nil {
		t.Fatal("up succeeded although the service exits 3")
	}
	t.Logf("up failed: %v", e.err)
	c := service(s.status(t, e.ref), "crasher")
	if c == nil {
		t.Fatal("status does not list the failed service")
	}
	if c.State != runtime.StateFailed || (c.ExitCode == nil && c.Reason == "") {
		t.Errorf("status of the failed service: %+v", c)
	}
}

func instancesAsked(t *testing.T, s *suite) {
	e := s.main()
	e.must(t)
	api := service(s.status(t, e.ref), "api")
	if api == nil || api.Desired != apiReplicas || api.Ready != apiReplicas {
		t.Errorf("status of api: %+v, want %d of %d ready", api, apiReplicas, apiReplicas)
	}
	ready := names(s.instances(t, e.ref), func(i Instance) bool { return i.Service == "api" && !i.Migration && i.Ready })
	if len(ready) != apiReplicas {
		t.Errorf("%d ready api instances, want %d: %v", len(ready), apiReplicas, ready)
	}
}

func sizeApplied(t *testing.T, s *suite) {
	e := s.main()
	e.must(t)
	api := service(s.status(t, e.ref), "api")
	if api == nil || api.CPU != cpuAsked || api.Memory != memoryAsked {
		t.Errorf("status of api: %+v, want %s and %s", api, cpuAsked, memoryAsked)
	}
	// Inside the instance, the kernel enforces the memory asked.
	m := s.fromMain(t)
	_, v2 := m.get(t, "memory-v2")
	_, v1 := m.get(t, "memory-v1")
	if strings.TrimSpace(v2.Output) != memoryAskedBytes && strings.TrimSpace(v1.Output) != memoryAskedBytes {
		t.Errorf("the memory limit inside api is not %s bytes: cgroup v2 %q, v1 %q", memoryAskedBytes, v2.Output, v1.Output)
	}
}

// ---- status and inventory ----

func statusRunning(t *testing.T, s *suite) {
	e := s.main()
	e.must(t)
	st := s.status(t, e.ref)
	if !st.Exists || st.Environment != e.ref.ID {
		t.Errorf("status: exists %v, environment %q", st.Exists, st.Environment)
	}
	if len(st.Services) != 2 {
		t.Errorf("status lists %d services, want 2: %+v", len(st.Services), st.Services)
	}
	for _, name := range []string{"store", "api"} {
		if svc := service(st, name); svc == nil || svc.State != runtime.StateRunning || svc.Ready != svc.Desired || svc.Ready < 1 {
			t.Errorf("status of %s: %+v", name, svc)
		}
	}
}

func statusExitCode(t *testing.T, s *suite) {
	e := s.crashing()
	c := service(s.status(t, e.ref), "crasher")
	if c == nil || c.ExitCode == nil || *c.ExitCode != 3 {
		t.Errorf("status of a service that exits 3: %+v", c)
	}
}

func statusUnknown(t *testing.T, s *suite) {
	m, err := s.manifestFor("conformance-never", map[string]any{"s": map[string]any{"image": s.opts.Image}}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.rt.Status(s.context(t), s.ref("never", m))
	if err != nil {
		t.Fatalf("status of an unknown environment: %v", err)
	}
	if st.Exists || len(st.Services) != 0 {
		t.Errorf("status of an unknown environment: %+v", st)
	}
}

func inventoryAttributes(t *testing.T, s *suite) {
	mainEnv, other := s.main(), s.other()
	mainEnv.must(t)
	other.must(t)
	inv, err := s.rt.Inventory(s.context(t))
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	owner := map[string]string{}
	for _, r := range inv {
		if r.Kind == "" || r.Name == "" || r.Environment == "" {
			t.Errorf("an inventory entry without kind, name or environment: %+v", r)
		}
		if prev, ok := owner[key(r)]; ok && prev != r.Environment {
			t.Errorf("%s is attributed to %s and %s", key(r), prev, r.Environment)
		}
		owner[key(r)] = r.Environment
		count[r.Environment]++
	}
	for _, id := range []string{mainEnv.ref.ID, other.ref.ID} {
		if count[id] == 0 {
			t.Errorf("the inventory attributes nothing to %s", id)
		}
		t.Logf("%s: %d resources", id, count[id])
	}
}
