package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRunAlternatives(t *testing.T) {
	for _, c := range []struct {
		pattern string
		match   []string
		miss    []string
		n       int
	}{
		{"TestSmoke|TestNegativeControl|TestGuardCountersZero", []string{"TestSmoke", "TestSmokeMore", "TestNegativeControl"}, []string{"TestOther"}, 3},
		{"^(TestConformance|TestImmediateStartupCannotBypassContainment)$", []string{"TestConformance", "TestImmediateStartupCannotBypassContainment"}, []string{"TestConformanceX", "XTestConformance"}, 2},
		{"TestActionUnderAct$", []string{"TestActionUnderAct"}, []string{"TestActionUnderActNotContained"}, 1},
		{"^TestA/sub|x$", []string{"TestA"}, []string{"TestB"}, 1},
		{"(a|b)c|d", []string{"ac", "bc", "d"}, []string{"c"}, 2},
		{"^(TestX)|(TestY)$", []string{"TestX", "TestY"}, []string{"ZTestX"}, 2},
	} {
		res, err := runAlternatives(c.pattern)
		if err != nil {
			t.Fatalf("%q: %v", c.pattern, err)
		}
		if len(res) != c.n {
			t.Errorf("%q: %d alternatives %v, want %d", c.pattern, len(res), res, c.n)
		}
		any := func(name string) bool {
			for _, re := range res {
				if re.MatchString(name) {
					return true
				}
			}
			return false
		}
		for _, m := range c.match {
			if !any(m) {
				t.Errorf("%q: %s matches no alternative %v", c.pattern, m, res)
			}
		}
		for _, m := range c.miss {
			if any(m) {
				t.Errorf("%q: %s matches an alternative %v", c.pattern, m, res)
			}
		}
	}
}

func TestSkipReason(t *testing.T) {
	for out, want := range map[string]string{
		"=== RUN   TestX\n!!! x\n    require.go:20: SKIPPED: needs the real test cluster\n--- SKIP: TestX (0.00s)\n": "needs the real test cluster",
		"=== RUN   TestY\n    bench_test.go:138: a load run: make bench-app\n--- SKIP: TestY (0.00s)\n":              "a load run: make bench-app",
		"": "",
	} {
		if got := skipReason(out); got != want {
			t.Errorf("skipReason(%q) = %q, want %q", out, got, want)
		}
	}
}

// module writes a throwaway module with one test package: TestPass passes, TestSkip skips
// with a reason, TestFail fails when FAIL=1.
func module(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.test/m\n\ngo 1.22\n",
		"m_test.go": `package m

import (
	"os"
	"testing"
)

func TestPass(t *testing.T) {}

func TestSkip(t *testing.T) { t.Skip("SKIPPED: needs a thing this machine lacks") }

func TestFail(t *testing.T) {
	if os.Getenv("FAIL") == "1" {
		t.Fatal("it broke")
	}
}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestGoPhase runs real go test through the reader: what passes, what fails, what skips, and
// a -run pattern one of whose alternatives names a test that does not exist.
func TestGoPhase(t *testing.T) {
	dir := module(t)
	t.Setenv("GOFLAGS", "-mod=mod")
	t.Setenv("GOWORK", "off")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, c := range []struct {
		name     string
		fail     string
		args     []string
		ok       bool
		problem  string
		passed   int
		failed   int
		skipped  int
		printed  string
		notPrint string
	}{
		{name: "all", args: []string{"-count=1", "./..."}, ok: true, passed: 2, skipped: 1, printed: "--- SKIP: TestSkip", notPrint: "=== RUN"},
		{name: "failing", fail: "1", args: []string{"-count=1", "./..."}, problem: "1 test(s) failed", passed: 1, failed: 1, skipped: 1, printed: "it broke"},
		{name: "renamed", args: []string{"-count=1", "-run", "TestPass|TestRenamed", "./..."}, problem: "-run alternative TestRenamed matched no test", passed: 1},
		{name: "nothing", args: []string{"-count=1", "-run", "^TestNone$", "./..."}, problem: "no test ran"},
		{name: "does not build", args: []string{"-count=1", "./nosuchpkg"}, problem: "failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("FAIL", c.fail)
			var out bytes.Buffer
			p, err := runGo(ctx, c.name, dir, false, c.args, nil, &out)
			if err != nil {
				t.Fatal(err)
			}
			if p.OK != c.ok {
				t.Errorf("OK = %v, want %v; problems %v\n%s", p.OK, c.ok, p.Problems, out.String())
			}
			if c.problem != "" && !strings.Contains(strings.Join(p.Problems, "\n"), c.problem) {
				t.Errorf("problems %v do not say %q", p.Problems, c.problem)
			}
			got := count(p.Tests)
			if got != (counts{c.passed, c.failed, c.skipped}) {
				t.Errorf("counts %+v, want %d passed %d failed %d skipped", got, c.passed, c.failed, c.skipped)
			}
			if c.printed != "" && !strings.Contains(out.String(), c.printed) {
				t.Errorf("the output does not show %q:\n%s", c.printed, out.String())
			}
			if c.notPrint != "" && strings.Contains(out.String(), c.notPrint) {
				t.Errorf("the quiet output shows %q:\n%s", c.notPrint, out.String())
			}
		})
	}
}

func TestSummary(t *testing.T) {
	const m = "github.com/antifailure/af/"
	start := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	unit := &Phase{Name: "unit", OK: true, Start: start, Seconds: 60, Tests: []Test{
		{Package: m + "a", Name: "TestUnit", Action: "pass"},
		{Package: m + "a", Name: "TestCluster", Action: "skip", Reason: "needs the real test cluster"},
		{Package: m + "b", Name: "TestBench", Action: "skip", Reason: "a load run"},
		{Package: m + "b", Name: "TestForgotten", Action: "skip", Reason: "needs the real test cluster"},
	}}
	cluster := &Phase{Name: "cluster", OK: true, Start: start.Add(time.Minute), Seconds: 120, Tests: []Test{
		{Package: m + "a", Name: "TestCluster", Action: "pass"},
	}}
	negative := &Phase{Name: "negative", OK: true, Negative: true, Start: start.Add(3 * time.Minute), Seconds: 30, Tests: []Test{
		{Package: m + "c", Name: "TestConformance", Action: "fail"},
	}}
	dir := t.TempDir()
	list := filepath.Join(dir, "expected")
	if err := os.WriteFile(list, []byte("# comment\nb TestBench a load run: make bench\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exp, err := readExpected(list)
	if err != nil {
		t.Fatal(err)
	}
	s := summarize([]*Phase{unit, cluster, negative}, exp)
	var out bytes.Buffer
	s.print(&out, 0)
	if s.ok() {
		t.Errorf("a skip run in no phase and not listed passed the summary:\n%s", out.String())
	}
	for _, want := range []string{
		"UNEXPECTED SKIP: b TestForgotten: needs the real test cluster",
		"1 test(s) skipped in one phase (no cluster or daemon there) ran and passed in another",
		"negative controls: 1 test(s) failed as required",
		"tests: 2 passed, 0 failed, 2 skipped",
		"make test: FAILED 2 passed, 0 failed, 1 unexpected skips (1 expected: b TestBench (a load run: make bench)) in",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the summary does not say %q:\n%s", want, out.String())
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(out.String()), "in 3m30s") {
		t.Errorf("the last line does not give the wall time 3m30s:\n%s", out.String())
	}

	// Listed, the last skip is expected, and the run passes; a failed phase fails it again.
	if err := os.WriteFile(list, []byte("b TestBench a load run: make bench\nb TestForgotten a reason\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exp, _ = readExpected(list)
	if s := summarize([]*Phase{unit, cluster, negative}, exp); !s.ok() {
		t.Errorf("with every skip listed or run elsewhere the summary fails: %v %v %v", s.failed, s.unexpected, s.problems)
	}
	cluster.OK, cluster.Problems = false, []string{"-run alternative x matched no test"}
	if s := summarize([]*Phase{unit, cluster, negative}, exp); s.ok() {
		t.Error("a failed phase passed the summary")
	}
	if _, err := readExpected(writeFile(t, "b TestNoReason\n")); err == nil {
		t.Error("an expected skip without a reason was read")
	}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStepNamesItsFailures runs a step whose report holds a failed test (a subtest under a
// parent): the step's problems name the failed leaf with its error, not the parent, so that
// a run's summary says which behaviour a negative control or conformance run tripped on.
func TestStepNamesItsFailures(t *testing.T) {
	dir := module(t)
	if err := os.WriteFile(filepath.Join(dir, "sub_test.go"), []byte(`package m

import "testing"

func TestParent(t *testing.T) {
	t.Run("child", func(t *testing.T) { t.Error("the child's own error") })
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOFLAGS", "-mod=mod")
	t.Setenv("GOWORK", "off")
	t.Setenv("FAIL", "1")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	report := filepath.Join(t.TempDir(), "report.jsonl")
	script := "cd " + dir + " && go test -json -count=1 ./... > " + report + "; exit 1"
	var out bytes.Buffer
	p, err := runStep(ctx, "step", report, true, []string{"sh", "-c", script}, nil, &out)
	if err != nil {
		t.Fatal(err)
	}
	problems := strings.Join(p.Problems, "\n")
	for _, want := range []string{"exit status 1", "failed in its report: ", "TestFail (m_test.go:", "it broke)", "TestParent/child (sub_test.go:", "the child's own error)"} {
		if !strings.Contains(problems, want) {
			t.Errorf("the problems do not say %q:\n%s", want, problems)
		}
	}
	if strings.Contains(problems, "TestParent (") || strings.Contains(problems, "TestParent;") {
		t.Errorf("the problems name the parent of a failed subtest:\n%s", problems)
	}
}
