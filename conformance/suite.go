// Package conformance is the behaviour suite every runtime must pass. RunRuntime runs the
// roster (package verdict) against any runtime.Runtime, through a Harness the runtime's tests
// provide (a way to try connections from inside an environment, and to look at its
// instances); RunStartupProof is the immediate-startup proof. verdict.Verify reads the report.
package conformance

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/antifailure/af/conformance/verdict"
	"github.com/antifailure/af/runtime"
)

// Targets are the hosts the suite tries to reach. They come from the caller, always: on the
// local test cluster a fake internet, a fake metadata server and the cluster's own API
// server, all in network namespaces the test cluster made. Never a real public address.
type Targets struct {
	// AllowedHost is an HTTP host (port 80) the suite's main environment allows by rule, and
	// AllowedIP its address (tried directly: an address must not get what the name gets).
	AllowedHost, AllowedIP string
	// UnlistedHost is an HTTP host (port 80) no rule names.
	UnlistedHost string
	// Banner is in every answer AllowedHost and UnlistedHost give, so an answer from the
	// origin is told apart from the runtime's refusal.
	Banner string
	// PublicTCP is host:port of a TCP echo on a public address.
	PublicTCP string
	// Resolver is host:port of a public DNS resolver (UDP); ResolverName is a name it answers.
	Resolver, ResolverName string
	// Metadata is host:port of a cloud metadata server (HTTP); MetadataBanner is in its answers.
	Metadata, MetadataBanner string
	// APIServer lists host:port of the platform's API server, every way an instance could
	// address it.
	APIServer []string
	// TokenPaths are the files a platform credential would be at inside an instance.
	TokenPaths []string
	// ClusterResolver is host:port of the platform's own resolver (UDP) and ClusterName a
	// name it answers: instances must not reach it, only the runtime's own resolver.
	ClusterResolver, ClusterName string
	// Node lists host:port of the node an instance runs on, at its own address, on ports that
	// answer from outside every environment; name one in the NodePort range (30000-32767).
	Node []string
}

// Options configure a run of the suite.
type Options struct {
	Targets Targets
	// Image runs every service the suite starts: it has a POSIX shell, busybox (httpd) and
	// aftool (testcluster/cmd/aftool).
	Image string
	// Prefix starts every environment id the suite uses (default "conf"; the startup proof's
	// "proof", so the two can run side by side: each counts only its own environments when it
	// checks that it left nothing behind).
	Prefix string
	// NamespacePrefix is the manifests' runtime.namespace_prefix (default "af-conf-"; the
	// startup proof's "af-proof-").
	NamespacePrefix string
	// Domain is the manifests' runtime.domain when the runtime declares ingress.
	Domain string
	// SkipSlow skips the slow behaviours that are not containment, as `go test -short` does:
	// for a quick look while developing. Containment behaviours still run; the verdict reader
	// refuses a run that skipped anything that requires nothing.
	SkipSlow bool
	// UpTimeout bounds each up and down (default 10m).
	UpTimeout time.Duration
}

func (o *Options) defaults() {
	if o.Prefix == "" {
		o.Prefix = "conf"
	}
	if o.NamespacePrefix == "" {
		o.NamespacePrefix = "af-conf-"
	}
	if o.Domain == "" {
		o.Domain = "conformance.af.test"
	}
	if o.UpTimeout == 0 {
		o.UpTimeout = 10 * time.Minute
	}
}

// missing names the options the suite cannot run without.
func (o Options) missing() []string {
	var out []string
	for name, v := range map[string]string{
		"Image": o.Image, "Targets.AllowedHost": o.Targets.AllowedHost, "Targets.AllowedIP": o.Targets.AllowedIP,
		"Targets.UnlistedHost": o.Targets.UnlistedHost, "Targets.Banner": o.Targets.Banner, "Targets.PublicTCP": o.Targets.PublicTCP,
		"Targets.Resolver": o.Targets.Resolver, "Targets.ResolverName": o.Targets.ResolverName, "Targets.Metadata": o.Targets.Metadata,
		"Targets.MetadataBanner": o.Targets.MetadataBanner, "Targets.ClusterResolver": o.Targets.ClusterResolver,
		"Targets.ClusterName": o.Targets.ClusterName,
	} {
		if v == "" {
			out = append(out, name)
		}
	}
	if len(o.Targets.APIServer) == 0 {
		out = append(out, "Targets.APIServer")
	}
	if len(o.Targets.TokenPaths) == 0 {
		out = append(out, "Targets.TokenPaths")
	}
	if len(o.Targets.Node) == 0 {
		out = append(out, "Targets.Node")
	}
	sort.Strings(out)
	return out
}

// decide says whether a behaviour is skipped, and why. Containment behaviours never are.
func decide(b verdict.Behaviour, caps runtime.Capabilities, skipSlow bool) (bool, string) {
	if b.Containment {
		return false, ""
	}
	if b.Requires != verdict.Always && !declares(caps, b.Requires) {
		return true, fmt.Sprintf("the runtime declares no %s capability", b.Requires)
	}
	if skipSlow && b.Slow {
		return true, "slow behaviours skipped (-short or Options.SkipSlow); a claim needs a full run"
	}
	return false, ""
}

func declares(caps runtime.Capabilities, r verdict.Requirement) bool {
	switch r {
	case verdict.Ingress:
		return caps.Ingress
	case verdict.Replicas:
		return caps.Replicas
	case verdict.Resources:
		return caps.Resources
	case verdict.Migrations:
		return caps.Migrations
	case verdict.NetLog:
		return caps.NetLog
	}
	return r == verdict.Always
}

// checkRoster refuses a roster that could let containment be skipped or a behaviour go
// unimplemented.
func checkRoster(impl map[string]func(*testing.T, *suite)) []string {
	var out []string
	seen := map[string]bool{}
	for _, b := range verdict.Roster {
		if seen[b.Name] {
			out = append(out, b.Name+" is in the roster twice")
		}
		seen[b.Name] = true
		if b.Containment && b.Requires != verdict.Always {
			out = append(out, fmt.Sprintf("containment behaviour %s requires %q: nothing may make a containment behaviour skippable", b.Name, b.Requires))
		}
		if impl[b.Name] == nil {
			out = append(out, b.Name+" has no implementation")
		}
	}
	for name := range impl {
		if !seen[name] {
			out = append(out, name+" is implemented but not in the roster")
		}
	}
	sort.Strings(out)
	return out
}

// suite is one run's state. Behaviours run one after another (never in parallel); the
// environments are made once and shared: side by side before the first behaviour (prepare),
// or when first needed.
type suite struct {
	rt   runtime.Runtime
	h    Harness
	opts Options
	caps runtime.Capabilities
	ctx  context.Context
	logf func(string, ...any)

	mu      sync.Mutex      // guards envs, order and memo, which prepare fills side by side
	envs    map[string]*env // by role
	order   []string        // roles in the order they were made, for the final down
	memo    map[string]*tried
	unknown []Unmanaged
	downed  map[string]bool

	// Recorded by downMain.
	mainDownErr  error
	otherBefore  []string
	unmanagedRef runtime.Ref
}

// env is one environment the suite made (or tried to). Its fields are read once done is
// closed.
type env struct {
	ref  runtime.Ref
	res  *runtime.Result
	err  error
	done chan struct{}
}

// notUp says why a behaviour that needs the environment cannot be measured.
func (e *env) notUp() error {
	if e.err == nil {
		return nil
	}
	return fmt.Errorf("%s environment %s did not come up: %w", verdict.Broken, e.ref.ID, e.err)
}

// tried is the memoised outcome of one batch of attempts. Its fields are read once done is
// closed.
type tried struct {
	attempts []Attempt
	out      map[string]Outcome
	err      error
	done     chan struct{}

	// For a second try of an attempt that must work (again).
	key   string
	run   func(context.Context, []Attempt) ([]Outcome, error)
	s     *suite
	pause time.Duration   // between the first try and the second
	mu    sync.Mutex      // guards out and again once done is closed
	again map[string]bool // attempts tried a second time
}

// RunRuntime runs every roster behaviour against the runtime the factory makes, as subtests
// of t, which must be the test named verdict.RootTest. A behaviour whose requirement the runtime does
// not declare is skipped by name with the reason; containment behaviours run whatever the
// runtime declares and whatever -short or SkipSlow say; a behaviour never reached (a -run or
// -skip filter) fails the suite, naming what went unmeasured. When the suite ends every
// environment it made is downed and the runtime's inventory must be what it was at the start.
func RunRuntime(t *testing.T, factory Factory, opts Options) {
	t.Helper()
	if t.Name() != verdict.RootTest {
		t.Fatalf("RunRuntime runs as %s, not %s: the verdict reader only counts behaviours under %s", t.Name(), verdict.RootTest, verdict.RootTest)
	}
	opts.defaults()
	impl := behaviours()
	if problems := checkRoster(impl); len(problems) > 0 {
		t.Fatalf("the roster is unsound:\n  %s", strings.Join(problems, "\n  "))
	}
	if m := opts.missing(); len(m) > 0 {
		t.Fatalf("conformance options missing: %s (the targets are never guessed: tests name hosts they made)", strings.Join(m, ", "))
	}
	subject := factory(t)
	if subject.Runtime == nil || subject.Harness == nil {
		t.Fatal("the factory returned no runtime or no harness")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &suite{rt: subject.Runtime, h: subject.Harness, opts: opts, caps: subject.Runtime.Capabilities(), ctx: ctx,
		logf: t.Logf, envs: map[string]*env{}, memo: map[string]*tried{}, downed: map[string]bool{}}
	skipSlow := opts.SkipSlow || testing.Short()
	t.Logf("runtime %s, capabilities %+v", s.rt.Name(), s.caps)

	before, err := s.rt.Inventory(ctx)
	if err != nil {
		t.Fatalf("inventory before the suite: %v", err)
	}
	defer s.finish(t, before)

	s.prepare(func(name string) bool {
		for _, b := range verdict.Roster {
			if b.Name == name {
				skip, _ := decide(b, s.caps, skipSlow)
				return skip
			}
		}
		return true
	})

	reached := map[string]bool{}
	for _, b := range verdict.Roster {
		fn := impl[b.Name]
		t.Run(b.Name, func(t *testing.T) {
			reached[b.Name] = true
			if skip, why := decide(b, s.caps, skipSlow); skip {
				t.Skipf("SKIPPED: %s", why)
			}
			t.Logf("%s: %s", b.Name, b.Description)
			fn(t, s)
		})
	}
	var unreached, containment []string
	for _, b := range verdict.Roster {
		if !reached[b.Name] {
			unreached = append(unreached, b.Name)
			if b.Containment {
				containment = append(containment, b.Name)
			}
		}
	}
	if len(unreached) > 0 {
		t.Errorf("%d behaviour(s) never reached, so unmeasured (a -run or -skip filter cannot narrow the conformance suite): %s; of them containment: %s",
			len(unreached), strings.Join(unreached, ", "), orNone(containment))
	}
}

// prepare makes every environment the behaviours that will run need, side by side, then runs
// their batches of attempts side by side, and returns when all of it is done: before the first
// behaviour, because some compare the suite's inventory before and after an operation, so
// nothing of the suite's may be in the making meanwhile. Nothing fails here: a behaviour that
// needs what did not come up reports it, as it would have when it made it itself. The positive
// controls run with the other batches, so every environment's instances are on the pods'
// segment when the link-local sweep from outside looks for neighbours, as they were when the
// behaviours made them one by one.
func (s *suite) prepare(skipped func(behaviour string) bool) {
	var ups []func() *env
	for _, u := range []struct {
		make func() *env
		by   []string
	}{
		{s.main, nil}, {s.other, nil}, // containment uses both, and nothing skips containment
		{s.failingMigration, usedBy[roleMigrate]},
		{s.crashing, usedBy[roleCrash]},
		{s.observed, usedBy[roleObserve]},
	} {
		if u.by == nil || slices.ContainsFunc(u.by, func(b string) bool { return !skipped(b) }) {
			ups = append(ups, u.make)
		}
	}
	observe := slices.ContainsFunc(usedBy[roleObserve], func(b string) bool { return !skipped(b) })
	start := time.Now()
	var wg sync.WaitGroup
	for _, up := range ups {
		wg.Go(func() { up() })
	}
	wg.Wait()
	s.logf("prepare: %d environment(s) made side by side in %s", len(ups), time.Since(start).Round(time.Millisecond))

	start = time.Now()
	batches := []func(){
		func() { s.outsideBatch() },
		func() { _, _ = s.tryFromMain() },
		func() { _, _ = s.tryFromOther() },
	}
	if observe {
		batches = append(batches, func() { _, _ = s.tryFromObserved() })
	}
	for _, b := range batches {
		wg.Go(b)
	}
	wg.Wait()
	s.logf("prepare: %d batch(es) of attempts run side by side in %s", len(batches), time.Since(start).Round(time.Millisecond))
}

// usedBy names, for each environment that not every run needs, the behaviours that use it:
// prepare makes it when one of them will run.
var usedBy = map[string][]string{
	roleMigrate: {"up/failed-migration-blocks-service"},
	roleCrash:   {"up/failed-service-findable", "status/exit-code", "observe/logs-of-a-crashed-service"},
	roleObserve: {"observe/blocked-host-logged", "observe/allowed-host-logged", "observe/capture-in-inbox",
		"observe/logs-of-a-service", "observe/webhook-reaches-service"},
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// finish downs every environment the suite made, removes what it made behind the runtime's
// back, and compares the inventory with the one taken at the start.
func (s *suite) finish(t *testing.T, before []runtime.Resource) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.UpTimeout)
	defer cancel()
	// Side by side: each down waits for its namespace to go, and nothing orders them.
	var wg sync.WaitGroup
	for _, role := range s.order {
		e := s.envs[role]
		if s.downed[role] {
			continue
		}
		wg.Go(func() {
			if err := s.rt.Down(ctx, e.ref); err != nil {
				t.Errorf("cleanup: down %s: %v", e.ref.ID, err)
			}
		})
	}
	wg.Wait()
	for _, u := range s.unknown {
		if err := u.Remove(ctx); err != nil {
			t.Errorf("cleanup: removing the unmanaged namespace: %v", err)
		}
	}
	after, err := s.rt.Inventory(ctx)
	if err != nil {
		t.Errorf("inventory after the suite: %v", err)
		return
	}
	had := map[string]bool{}
	for _, r := range before {
		had[key(r)] = true
	}
	var left []string
	for _, r := range after {
		if !had[key(r)] && s.ours(r) {
			left = append(left, key(r)+" (environment "+r.Environment+")")
		}
	}
	if len(left) > 0 {
		t.Errorf("the suite left %d resource(s) behind: %s", len(left), strings.Join(left, ", "))
	} else {
		t.Logf("after the suite the inventory is as it was: %d resource(s), none of them the suite's", len(after))
	}
}

// ours reports whether a resource belongs to one of the suite's environments (by their id
// prefix, or their namespace prefix where a resource names no environment).
func (s *suite) ours(r runtime.Resource) bool {
	return strings.HasPrefix(r.Environment, s.opts.Prefix+"-") || strings.HasPrefix(r.Namespace, s.opts.NamespacePrefix) ||
		(r.Kind == "Namespace" && strings.HasPrefix(r.Name, s.opts.NamespacePrefix))
}

func key(r runtime.Resource) string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

// memoised returns the batch of attempts run under key, once it has run, or nil.
func (s *suite) memoised(key string) *tried {
	s.mu.Lock()
	m := s.memo[key]
	s.mu.Unlock()
	if m != nil {
		<-m.done
	}
	return m
}

// try runs a batch of attempts once per key and remembers the outcomes. A caller that comes
// while the batch runs waits for it.
func (s *suite) try(key string, run func(context.Context, []Attempt) ([]Outcome, error), attempts []Attempt) *tried {
	s.mu.Lock()
	if m, ok := s.memo[key]; ok {
		s.mu.Unlock()
		<-m.done
		return m
	}
	m := &tried{attempts: attempts, out: map[string]Outcome{}, done: make(chan struct{}), key: key, run: run, s: s, pause: secondTryAfter, again: map[string]bool{}}
	s.memo[key] = m
	s.mu.Unlock()
	defer close(m.done)
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Minute)
	defer cancel()
	outs, err := run(ctx, attempts)
	if err == nil && len(outs) != len(attempts) {
		err = fmt.Errorf("the harness returned %d outcomes for %d attempts", len(outs), len(attempts))
	}
	m.err = err
	if err == nil {
		for i, a := range attempts {
			m.out[a.Name] = outs[i]
			s.logf("%s: %s (%s) -> ok=%v %q", key, a.Name, a, outs[i].OK, outs[i].Output)
		}
	}
	return m
}

// get returns the outcome of one named attempt of the batch, failing t when the batch could
// not run.
func (m *tried) get(t *testing.T, name string) (Attempt, Outcome) {
	t.Helper()
	if m.err != nil {
		t.Fatalf("%s the attempts could not be run: %v", verdict.Broken, m.err)
	}
	for _, a := range m.attempts {
		if a.Name == name {
			m.mu.Lock()
			defer m.mu.Unlock()
			return a, m.out[name]
		}
	}
	t.Fatalf("%s no attempt named %s", verdict.Broken, name)
	return Attempt{}, Outcome{}
}

// secondTryAfter is how long a second try of an attempt that must work waits after the first.
const secondTryAfter = 2 * time.Second

// retried returns the outcome of an attempt that must work (a positive control, or a way an
// environment is allowed out) after trying it once more, alone, when its first outcome does
// not pass ok. An enforcer that decides new connections in userspace drops first packets while
// its queue overflows (kube-network-policies under a burst of new connections: the kernel's
// user_dropped counter rose by 232 in four seconds on two loaded cores), which costs a lookup
// its resolver's timeout; one such drop says nothing about whether the way is open. A second
// failure stands, and an attempt that must fail is never tried again: an escape seen once is
// an escape. The outcome says when the second try was what passed.
func (m *tried) retried(name string, ok func(Outcome) bool) (Attempt, Outcome) {
	var a Attempt
	for _, x := range m.attempts {
		if x.Name == name {
			a = x
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	first := m.out[name]
	if ok(first) || m.again[name] || m.run == nil {
		return a, first
	}
	m.again[name] = true
	ctx, cancel := context.WithTimeout(m.s.ctx, 5*time.Minute)
	defer cancel()
	select {
	case <-ctx.Done():
		return a, first
	case <-time.After(m.pause):
	}
	outs, err := m.run(ctx, []Attempt{a})
	switch {
	case err != nil:
		first.Output += fmt.Sprintf(" (a second try could not run: %v)", err)
	case len(outs) != 1:
		first.Output += fmt.Sprintf(" (a second try returned %d outcomes)", len(outs))
	case ok(outs[0]):
		second := outs[0]
		second.Output = fmt.Sprintf("on a second try (the first: ok=%v %q): %s", first.OK, first.Output, second.Output)
		first = second
	default:
		first.Output += fmt.Sprintf(" (and on a second try: ok=%v %q)", outs[0].OK, outs[0].Output)
	}
	m.s.logf("%s: %s (%s) tried again -> ok=%v %q", m.key, a.Name, a, first.OK, first.Output)
	m.out[name] = first
	return a, first
}
