package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"

	"github.com/antifailure/af/conformance/verdict"
	"github.com/antifailure/af/runtime"
)

// The anti-skip proofs run the suite in a child process of this test binary, against a
// runtime that leaks everything (every attempt from inside an environment gets through),
// read the child's go test -json with the verdict reader, and require that the containment
// behaviours ran (and failed) whatever the child tried to skip them with.

const thisPackage = "github.com/antifailure/af/conformance"

// fakeMode is set in the child's environment; the child tests do nothing without it.
const fakeMode = "AF_CONFORMANCE_FAKE"

// leaky is a runtime whose environments contain nothing. Only the anti-skip tests use it.
// The suite brings its environments up side by side, so its state is locked.
type leaky struct {
	caps runtime.Capabilities
	mu   sync.Mutex
	envs map[string]bool
}

func (l *leaky) Name() string                       { return "kubernetes" }
func (l *leaky) Capabilities() runtime.Capabilities { return l.caps }
func (l *leaky) Up(_ context.Context, spec runtime.Spec) (*runtime.Result, error) {
	if spec.ID == "" {
		return nil, errors.New("no environment id")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.envs[spec.ID] = true
	return &runtime.Result{Environment: spec.ID}, nil
}
func (l *leaky) Down(_ context.Context, env runtime.Ref) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.envs, env.ID)
	return nil
}
func (l *leaky) Status(_ context.Context, env runtime.Ref) (*runtime.Status, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return &runtime.Status{Environment: env.ID, Exists: l.envs[env.ID]}, nil
}
func (l *leaky) Reachable(context.Context) error { return nil }
func (l *leaky) Lister() runtime.Lister          { return nil }
func (l *leaky) Watcher() runtime.Watcher        { return nil }
func (l *leaky) Observer() runtime.Observer      { return nil }
func (l *leaky) Checker() runtime.Checker        { return nil }
func (l *leaky) Inventory(context.Context) ([]runtime.Resource, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []runtime.Resource
	for id := range l.envs {
		out = append(out, runtime.Resource{Kind: "Namespace", Name: "af-conf-" + id, Environment: id})
	}
	return out, nil
}

// leakyHarness: everything tried from anywhere gets the origin's answer.
type leakyHarness struct{ banner string }

func (h leakyHarness) Try(_ context.Context, _ runtime.Ref, _ string, a []Attempt) ([]Outcome, error) {
	out := make([]Outcome, len(a))
	for i := range a {
		out[i] = Outcome{OK: true, Output: "200 " + h.banner + " af-fake-metadata"}
	}
	return out, nil
}
func (h leakyHarness) TryOutside(ctx context.Context, a []Attempt) ([]Outcome, error) {
	return h.Try(ctx, runtime.Ref{}, "", a)
}
func (leakyHarness) Addresses(context.Context, runtime.Ref, string) ([]string, error) {
	return []string{"lonely.af-conf-conf-other.svc.cluster.local:8080"}, nil
}
func (leakyHarness) Instances(context.Context, runtime.Ref) ([]Instance, error) { return nil, nil }
func (leakyHarness) Remove(context.Context, runtime.Ref, string) error          { return nil }
func (leakyHarness) Unmanaged(context.Context, runtime.Ref) (Unmanaged, error) {
	return nopUnmanaged{}, nil
}
func (leakyHarness) Fetch(context.Context, string) (int, string, error) { return 200, "ok", nil }

type nopUnmanaged struct{}

func (nopUnmanaged) Unchanged(context.Context) error { return nil }
func (nopUnmanaged) Remove(context.Context) error    { return nil }

// fakeOptions names targets the leaky runtime never dials (it dials nothing).
func fakeOptions() Options {
	return Options{Image: "af.test/aftest:1", Targets: Targets{
		AllowedHost: "allowed.fake.test", AllowedIP: "198.51.100.20", UnlistedHost: "unlisted.fake.test", Banner: "af-fake-internet",
		PublicTCP: "198.51.100.10:80", Resolver: "198.51.100.53:53", ResolverName: "public.fake.test",
		Metadata: "169.254.77.1:80", MetadataBanner: "af-fake-metadata",
		APIServer: []string{"10.244.0.1:6443"}, TokenPaths: []string{"/var/run/secrets/kubernetes.io/serviceaccount/token"},
		ClusterResolver: "10.96.0.10:53", ClusterName: "kubernetes.default.svc.cluster.local",
		Node: []string{"10.244.0.1:10250", "10.244.0.1:30999"},
	}}
}

func leakyFactory(caps runtime.Capabilities) Factory {
	return func(*testing.T) Subject {
		return Subject{Runtime: &leaky{caps: caps, envs: map[string]bool{}}, Harness: leakyHarness{banner: "af-fake-internet"}}
	}
}

var allCaps = runtime.Capabilities{Ingress: true, Replicas: true, Resources: true, Migrations: true}

// TestConformance is the child: the suite against the leaky runtime. It runs only when an
// anti-skip test starts this binary with AF_CONFORMANCE_FAKE set.
func TestConformance(t *testing.T) {
	mode := os.Getenv(fakeMode)
	if mode == "" {
		t.Skip("SKIPPED: runs only as the child process of the anti-skip tests")
	}
	caps := allCaps
	switch mode {
	case "no-capabilities":
		caps = runtime.Capabilities{}
	case "tampered-roster":
		// A roster edited to give a containment behaviour a requirement the runtime lacks.
		for i := range verdict.Roster {
			if verdict.Roster[i].Name == "egress/no-token" {
				verdict.Roster[i].Requires = verdict.Ingress
			}
		}
		caps = runtime.Capabilities{}
	}
	RunRuntime(t, leakyFactory(caps), fakeOptions())
}

// TestNotTheRoot is a child that calls RunRuntime from a test of another name.
func TestNotTheRoot(t *testing.T) {
	if os.Getenv(fakeMode) == "" {
		t.Skip("SKIPPED: runs only as the child process of the anti-skip tests")
	}
	RunRuntime(t, leakyFactory(allCaps), fakeOptions())
}

// child runs this test binary with args under test2json and returns the report.
func child(t *testing.T, mode string, args ...string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(goruntime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(gobin, append([]string{"tool", "test2json", "-p", thisPackage, os.Args[0], "-test.v=test2json"}, args...)...)
	cmd.Env = append(os.Environ(), fakeMode+"="+mode)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running the child: %v\n%s", err, stderr.String())
	}
	return out.String()
}

// outcome returns the final action of a test in a report ("" when it never ran).
func outcome(report, test string) string {
	last := ""
	for _, line := range strings.Split(report, "\n") {
		for _, action := range []string{"pass", "fail", "skip"} {
			if strings.Contains(line, `"Action":"`+action+`"`) && strings.Contains(line, `"Test":"`+test+`"`) {
				last = action
			}
		}
	}
	return last
}

// text is everything the report's tests printed (test2json splits long lines into several
// events).
func text(report string) string {
	var b strings.Builder
	for _, line := range strings.Split(report, "\n") {
		var ev struct{ Output string } // one line of go test -json
		if json.Unmarshal([]byte(line), &ev) == nil {
			b.WriteString(ev.Output)
		}
	}
	return b.String()
}

func refusal(t *testing.T, report string) *verdict.Refusal {
	t.Helper()
	_, err := verdict.Verify(strings.NewReader(report), thisPackage)
	var r *verdict.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("the reader accepted the report (%v)", err)
	}
	return r
}

// leakyOutcome is what a containment behaviour must come to against the leaky runtime: every
// one fails, but the one that asks only that an allowed host is reached.
func leakyOutcome(b verdict.Behaviour) string {
	if b.Name == "egress/allowed-host-reached" {
		return "pass"
	}
	return "fail"
}

func containment() []verdict.Behaviour {
	var out []verdict.Behaviour
	for _, b := range verdict.Roster {
		if b.Containment {
			out = append(out, b)
		}
	}
	return out
}

// TestCapabilitiesCannotSkipContainment: a runtime that declares nothing has its ingress
// behaviour skipped by name, and every containment behaviour still runs, and fails.
func TestCapabilitiesCannotSkipContainment(t *testing.T) {
	report := child(t, "no-capabilities", "-test.run", "^TestConformance$")
	for _, b := range containment() {
		if got := outcome(report, verdict.RootTest+"/"+b.Name); got != leakyOutcome(b) {
			t.Errorf("containment behaviour %s: %q, want it run and %s against the leaky runtime", b.Name, got, leakyOutcome(b))
		}
	}
	if got := outcome(report, verdict.RootTest+"/up/reachable-url"); got != "skip" {
		t.Errorf("up/reachable-url: %q, want skipped by name", got)
	}
	if !strings.Contains(text(report), "SKIPPED: the runtime declares no ingress capability") {
		t.Error("the ingress skip does not say why")
	}
	r := refusal(t, report)
	for _, b := range containment() {
		if leakyOutcome(b) == "fail" && !strings.Contains(r.Error(), "containment behaviour "+b.Name+" failed") {
			t.Errorf("the refusal does not name %s:\n%v", b.Name, r)
		}
	}
}

// TestShortCannotSkipContainment: -short (the skip-slow knob) skips slow behaviours that are
// not containment, and runs every containment behaviour, though all of them are slow.
func TestShortCannotSkipContainment(t *testing.T) {
	report := child(t, "all", "-test.run", "^TestConformance$", "-test.short")
	for _, b := range containment() {
		if !b.Slow {
			t.Errorf("%s is not marked slow: this test would prove nothing about it", b.Name)
		}
		if got := outcome(report, verdict.RootTest+"/"+b.Name); got != leakyOutcome(b) {
			t.Errorf("containment behaviour %s under -short: %q, want it run (and %s)", b.Name, got, leakyOutcome(b))
		}
	}
	if got := outcome(report, verdict.RootTest+"/status/exit-code"); got != "skip" {
		t.Errorf("status/exit-code under -short: %q, want skipped", got)
	}
	r := refusal(t, report)
	if !strings.Contains(r.Error(), "status/exit-code was skipped, but it requires nothing a runtime may lack") {
		t.Errorf("the refusal does not name the skipped slow behaviour:\n%v", r)
	}
}

// TestFiltersCannotNarrowTheSuite: a -run or -skip filter that leaves behaviours out fails
// the suite, naming the unmeasured containment behaviours; the reader refuses the report.
func TestFiltersCannotNarrowTheSuite(t *testing.T) {
	for _, args := range [][]string{
		{"-test.run", "^TestConformance$/^up/starts-a-service$"},
		{"-test.run", "^TestConformance$", "-test.skip", "^TestConformance$/^egress/"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			report := child(t, "all", args...)
			if got := outcome(report, verdict.RootTest); got != "fail" {
				t.Fatalf("the root test: %q, want failed", got)
			}
			if got := outcome(report, verdict.RootTest+"/egress/no-metadata"); got != "" {
				t.Fatalf("the filter did not keep egress/no-metadata out (%q): this test proves nothing", got)
			}
			if !strings.Contains(text(report), "never reached, so unmeasured") {
				t.Error("the root does not say what went unmeasured")
			}
			var names []string
			for _, b := range containment() {
				names = append(names, b.Name)
			}
			if !strings.Contains(text(report), "of them containment: "+strings.Join(names, ", ")) {
				t.Errorf("the root does not name the unmeasured containment behaviours")
			}
			r := refusal(t, report)
			if !strings.Contains(r.Error(), "never reached, so unmeasured") {
				t.Errorf("the refusal: %v", r)
			}
		})
	}
}

// TestTamperedRosterIsRefused: a roster in which a containment behaviour has a requirement
// is refused before anything runs.
func TestTamperedRosterIsRefused(t *testing.T) {
	report := child(t, "tampered-roster", "-test.run", "^TestConformance$")
	if got := outcome(report, verdict.RootTest+"/egress/no-token"); got == "skip" {
		t.Fatal("the tampered roster skipped a containment behaviour")
	}
	if !strings.Contains(text(report), `containment behaviour egress/no-token requires "ingress"`) {
		t.Errorf("the root does not say why the roster is unsound:\n%s", tail(report))
	}
	refusal(t, report)
}

// TestRunRuntimeOnlyAsTheRoot: the suite refuses to run under any other test name, where
// the reader would not count it.
func TestRunRuntimeOnlyAsTheRoot(t *testing.T) {
	report := child(t, "all", "-test.run", "^TestNotTheRoot$")
	if got := outcome(report, "TestNotTheRoot"); got != "fail" {
		t.Fatalf("TestNotTheRoot: %q, want failed", got)
	}
	if !strings.Contains(text(report), "RunRuntime runs as TestNotTheRoot, not TestConformance") {
		t.Errorf("no reason given:\n%s", tail(report))
	}
}

func tail(s string) string {
	if len(s) > 3000 {
		return s[len(s)-3000:]
	}
	return s
}

// TestDecide: the skip decision, as data.
func TestDecide(t *testing.T) {
	for _, c := range []struct {
		b        verdict.Behaviour
		caps     runtime.Capabilities
		slow     bool
		skip     bool
		contains string
	}{
		{verdict.Behaviour{Name: "c", Containment: true, Slow: true, Requires: verdict.Ingress}, runtime.Capabilities{}, true, false, ""},
		{verdict.Behaviour{Name: "i", Requires: verdict.Ingress}, runtime.Capabilities{}, false, true, "no ingress"},
		{verdict.Behaviour{Name: "i", Requires: verdict.Ingress}, runtime.Capabilities{Ingress: true}, false, false, ""},
		{verdict.Behaviour{Name: "r", Requires: verdict.Replicas}, runtime.Capabilities{Ingress: true}, false, true, "no replicas"},
		{verdict.Behaviour{Name: "m", Requires: verdict.Migrations, Slow: true}, allCaps, true, true, "slow"},
		{verdict.Behaviour{Name: "s", Slow: true}, allCaps, false, false, ""},
	} {
		skip, why := decide(c.b, c.caps, c.slow)
		if skip != c.skip || !strings.Contains(why, c.contains) {
			t.Errorf("%+v caps %+v slow %v: skip %v %q", c.b, c.caps, c.slow, skip, why)
		}
	}
}

// TestRosterIsImplemented: every behaviour has an implementation and nothing else does.
func TestRosterIsImplemented(t *testing.T) {
	if p := checkRoster(behaviours()); len(p) > 0 {
		t.Errorf("roster: %v", p)
	}
	impl := behaviours()
	delete(impl, "egress/no-token")
	impl["egress/extra"] = impl["up/idempotent"]
	p := fmt.Sprint(checkRoster(impl))
	if !strings.Contains(p, "egress/no-token has no implementation") || !strings.Contains(p, "egress/extra is implemented but not in the roster") {
		t.Errorf("checkRoster missed a gap: %s", p)
	}
}

// TestPrepareNamesRosterBehaviours: prepare makes an environment when a behaviour that uses it
// will run; a name not in the roster would count as skipped, and the environment would be made
// later, by the behaviour itself, while others compare the inventory.
func TestPrepareNamesRosterBehaviours(t *testing.T) {
	in := map[string]bool{}
	for _, b := range verdict.Roster {
		in[b.Name] = true
	}
	for role, names := range usedBy {
		for _, n := range names {
			if !in[n] {
				t.Errorf("usedBy[%s] names %s, which is not in the roster", role, n)
			}
		}
	}
}
