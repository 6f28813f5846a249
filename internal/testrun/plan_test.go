package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The plan names each phase once, every go phase's packages exist, and every test a -run or
// -skip names exactly is declared in its package: a renamed test fails here before it fails
// a 50-minute make test.
func TestThePlan(t *testing.T) {
	root := filepath.Join("..", "..")
	seen := map[string]bool{}
	var phases []phase
	stages := map[string]int{}
	for _, e := range plan() {
		stages[e.stage]++
		if e.phase != nil {
			phases = append(phases, *e.phase)
		}
		for _, l := range e.together {
			if len(l.phases) == 0 {
				t.Errorf("lane %s runs nothing", l.name)
			}
			phases = append(phases, l.phases...)
		}
	}
	for _, s := range []string{stageDeps, stageLint, stageUnit, stageIntegration} {
		if stages[s] == 0 {
			t.Errorf("stage %s has nothing", s)
		}
	}
	if len(stages) != 4 {
		t.Errorf("stages %v", stages)
	}
	named := regexp.MustCompile(`^\^\(([A-Za-z0-9|]+)\)\$$`)
	for _, p := range phases {
		if seen[p.name] {
			t.Errorf("phase %s twice: its records would be one", p.name)
		}
		seen[p.name] = true
		if p.kind != "go" {
			if _, err := os.Stat(filepath.Join(root, p.args[0])); p.args[0] != "make" && p.args[0] != "bin/afcluster" && err != nil {
				t.Errorf("phase %s: %v", p.name, err)
			}
			continue
		}
		var pattern string
		var pkgs []string
		for i := 0; i < len(p.args); i++ {
			switch a := p.args[i]; {
			case a == "-run" || a == "-skip":
				pattern = p.args[i+1]
				i++
			case a == "-timeout" || a == "-parallel":
				i++
			case strings.HasPrefix(a, "./"):
				pkgs = append(pkgs, strings.TrimSuffix(a, "..."))
			}
		}
		if len(pkgs) == 0 {
			t.Errorf("phase %s names no package", p.name)
		}
		for _, pkg := range pkgs {
			if _, err := os.Stat(filepath.Join(root, p.dir, pkg)); err != nil {
				t.Errorf("phase %s: %v", p.name, err)
			}
		}
		if _, err := regexp.Compile(pattern); err != nil {
			t.Errorf("phase %s: %v", p.name, err)
		}
		m := named.FindStringSubmatch(pattern)
		if m == nil {
			continue
		}
		for _, test := range strings.Split(m[1], "|") {
			if !declared(t, filepath.Join(root, pkgs[0]), test) {
				t.Errorf("phase %s names %s, which %s does not declare", p.name, test, pkgs[0])
			}
		}
	}
}

// declared says whether a test file below dir declares func test(.
func declared(t *testing.T, dir, test string) bool {
	found := false
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || found || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found = strings.Contains(string(b), "func "+test+"(")
		return nil
	})
	return found
}

// The runner: a plan stops at the first phase that fails; lanes run at once, each one's output
// printed whole, in order, when all have ended; the cluster is taken down at the end once the
// integration stage began, and only then; -stage runs only its stages.
func TestRunPlan(t *testing.T) {
	t.Setenv("AF_TEST_RESULTS", t.TempDir())
	sh := func(name, script string) phase { return command(name, "sh", "-c", script) }
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		entries  []entry
		stages   map[string]bool
		ok       bool
		takeDown bool
		want     []string // in this order
		not      []string
	}{
		{"unit only", []entry{
			{stage: stageUnit, phase: ptr(sh("u1", "echo one"))},
			{stage: stageIntegration, phase: ptr(sh("i1", "echo never"))},
		}, map[string]bool{stageUnit: true}, true, false, []string{"== u1: sh -c echo one", "one", "== phase u1 ok"}, []string{"never"}},
		{"stops at the first failure and takes the cluster down", []entry{
			{stage: stageUnit, phase: ptr(sh("u1", "echo one"))},
			{stage: stageIntegration, say: "1. up"},
			{stage: stageIntegration, phase: ptr(sh("i1", "echo broken; exit 3"))},
			{stage: stageIntegration, phase: ptr(sh("i2", "echo never"))},
		}, nil, false, true, []string{"== 1. up", "broken", "== phase i1 FAILED", "== taking the test cluster down"}, []string{"never"}},
		{"together: both lanes run to their end, printed whole in order", []entry{
			{stage: stageIntegration, together: []lane{
				{name: "slow", phases: []phase{sh("s1", "sleep 0.3; echo slow-1"), sh("s2", "echo slow-2")}},
				{name: "fails", phases: []phase{sh("f1", "echo fails-1; exit 1"), sh("f2", "echo never")}},
			}},
			{stage: stageIntegration, phase: ptr(sh("after", "echo never"))},
		}, nil, false, true, []string{"== together: slow fails", "still running: slow", "---- slow: ok", "slow-1", "slow-2", "---- fails: FAILED", "fails-1", "== taking the test cluster down"}, []string{"never"}},
		{"an environment for what follows", []entry{
			{stage: stageUnit, doName: "set", do: func(ctx context.Context, r *runner) error { r.env = append(r.env, "AF_PLAN_TEST=yes"); return nil }},
			{stage: stageUnit, phase: ptr(func() phase {
				p := sh("env", `echo "$AF_PLAN_TEST $AF_PHASE_ONLY"`)
				p.env = []string{"AF_PHASE_ONLY=here"}
				return p
			}())},
			{stage: stageUnit, phase: ptr(sh("env2", `echo "[$AF_PHASE_ONLY]"`))},
		}, nil, true, false, []string{"== set", "yes here", "[]"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			tookDown := false
			r := &runner{out: &lockedWriter{w: &out}, lanePrintEvery: 100 * time.Millisecond, takeDown: func(context.Context) { tookDown = true }}
			if ok := r.runPlan(ctx, c.entries, c.stages); ok != c.ok || tookDown != c.takeDown {
				t.Errorf("ok %v, took down %v; want %v, %v\n%s", ok, tookDown, c.ok, c.takeDown, out.String())
			}
			s, at := out.String(), 0
			for _, w := range c.want {
				i := strings.Index(s[at:], w)
				if i < 0 {
					t.Fatalf("%q not after %d in:\n%s", w, at, s)
				}
				at += i + len(w)
			}
			for _, n := range c.not {
				if strings.Contains(s, n) {
					t.Errorf("%q in:\n%s", n, s)
				}
			}
		})
	}
}
