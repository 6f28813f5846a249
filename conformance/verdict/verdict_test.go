package verdict

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const pkg = "github.com/antifailure/af/runtime/kubernetes"

// stream builds a go test -json report: the whole roster passing, the startup proof passing,
// the package passing, then edit changes it.
type stream struct {
	lines []map[string]any
}

func (s *stream) add(action, pkgName, test, output string) {
	ev := map[string]any{"Action": action, "Package": pkgName}
	if test != "" {
		ev["Test"] = test
	}
	if output != "" {
		ev["Output"] = output
	}
	s.lines = append(s.lines, ev)
}

func (s *stream) String() string {
	var b strings.Builder
	for _, l := range s.lines {
		data, _ := json.Marshal(l)
		b.Write(data)
		b.WriteByte('\n')
	}
	return b.String()
}

// good returns a passing report; results overrides the final action of behaviours by name
// ("" drops the behaviour from the report).
func good(results map[string]string, extra func(*stream)) string {
	s := &stream{}
	s.add("run", pkg, RootTest, "")
	for _, b := range Roster {
		action, set := results[b.Name]
		if !set {
			action = "pass"
		}
		if action == "" {
			continue
		}
		name := RootTest + "/" + b.Name
		s.add("run", pkg, name, "")
		if action == "skip" {
			s.add("output", pkg, name, "    suite.go:10: SKIPPED: the runtime declares no ingress\n")
		}
		if action == "skip-silent" {
			action = "skip"
		}
		s.add(action, pkg, name, "")
	}
	s.add("pass", pkg, RootTest, "")
	s.add("run", pkg, StartupProof, "")
	s.add("pass", pkg, StartupProof, "")
	if extra != nil {
		extra(s)
	}
	s.add("pass", pkg, "", "")
	return s.String()
}

func TestVerifyAccepts(t *testing.T) {
	c, err := Verify(strings.NewReader(good(nil, nil)), pkg)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.String(); got != "39 behaviours passed, 0 skipped, startup proof passed" {
		t.Errorf("claim: %s", got)
	}
	// A behaviour that requires ingress may be skipped, by name, saying why.
	c, err = Verify(strings.NewReader(good(map[string]string{"up/reachable-url": "skip"}, nil)), pkg)
	if err != nil {
		t.Fatal(err)
	}
	if c.String() != "38 behaviours passed, 1 skipped, startup proof passed" || c.SkipReasons[0] != "up/reachable-url: the runtime declares no ingress" {
		t.Errorf("claim with a skip: %s %v", c, c.SkipReasons)
	}
	// A behaviour's own nested subtests are fine.
	_, err = Verify(strings.NewReader(good(nil, func(s *stream) {
		s.add("run", pkg, RootTest+"/up/instances-asked/three", "")
		s.add("pass", pkg, RootTest+"/up/instances-asked/three", "")
	})), pkg)
	if err != nil {
		t.Errorf("nested subtest refused: %v", err)
	}
}

func TestVerifyRefuses(t *testing.T) {
	for _, c := range []struct {
		name   string
		report string
		reason string
	}{
		{"a containment behaviour skipped", good(map[string]string{"egress/no-metadata": "skip"}, nil),
			"containment behaviour egress/no-metadata was skipped"},
		{"a containment behaviour failed", good(map[string]string{"egress/no-bypass-by-udp": "fail"}, nil),
			"containment behaviour egress/no-bypass-by-udp failed"},
		{"a behaviour failed", good(map[string]string{"down/idempotent": "fail"}, nil),
			"behaviour down/idempotent failed"},
		{"a -run filter left behaviours out", good(map[string]string{"egress/no-token": "", "status/exit-code": ""}, nil),
			"2 roster behaviour(s) never reached, so unmeasured: status/exit-code, egress/no-token"},
		{"a skip of a behaviour that requires nothing", good(map[string]string{"up/idempotent": "skip"}, nil),
			"up/idempotent was skipped, but it requires nothing a runtime may lack"},
		{"a skip without a reason", good(map[string]string{"up/reachable-url": "skip-silent"}, nil),
			"up/reachable-url was skipped without saying why"},
		{"a behaviour twice", good(nil, func(s *stream) {
			s.add("run", pkg, RootTest+"/up/idempotent", "")
			s.add("pass", pkg, RootTest+"/up/idempotent", "")
		}), "up/idempotent ran 2 times"},
		{"the root twice (-count 2)", good(nil, func(s *stream) { s.add("pass", pkg, RootTest, "") }),
			"TestConformance ran 2 times"},
		{"no startup proof", strings.Replace(good(nil, nil), `"Test":"`+StartupProof+`"`, `"Test":"TestSomethingElse"`, -1),
			"the startup proof TestImmediateStartupCannotBypassContainment did not run"},
		{"the startup proof failed", strings.Replace(good(nil, nil), `{"Action":"pass","Package":"`+pkg+`","Test":"`+StartupProof+`"}`, `{"Action":"fail","Package":"`+pkg+`","Test":"`+StartupProof+`"}`, 1),
			"the startup proof TestImmediateStartupCannotBypassContainment did not pass (fail)"},
		{"the package failed", strings.Replace(good(nil, nil), `{"Action":"pass","Package":"`+pkg+`"}`, `{"Action":"fail","Package":"`+pkg+`"}`, 1),
			"package " + pkg + " did not pass"},
		{"another package's test of the same name", good(nil, func(s *stream) {
			s.add("pass", "example.com/fake", StartupProof, "")
		}), "example.com/fake " + StartupProof + ": a test of that name ran in another package"},
		{"a subtest that is not in the roster", good(nil, func(s *stream) {
			s.add("pass", pkg, RootTest+"/egress/made-up", "")
		}), "TestConformance/egress/made-up is not a roster behaviour"},
		{"the report of another package", good(nil, nil) + "", "package example.com/other has no result"},
		{"not json", "this is not a report\n" + good(nil, nil), "line 1 is not a go test -json event"},
		{"empty", "", "the suite's root test TestConformance did not run"},
	} {
		p := pkg
		if c.name == "the report of another package" {
			p = "example.com/other"
		}
		_, err := Verify(strings.NewReader(c.report), p)
		var r *Refusal
		if !errors.As(err, &r) {
			t.Errorf("%s: accepted (%v)", c.name, err)
			continue
		}
		if !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: reasons do not say %q:\n%v", c.name, c.reason, err)
		}
	}
}

func TestRosterNamesAreUnique(t *testing.T) {
	seen := map[string]bool{}
	containment := 0
	for _, b := range Roster {
		if seen[b.Name] || b.Name == "" || b.Description == "" {
			t.Errorf("behaviour %+v: duplicate or unnamed/undescribed", b)
		}
		seen[b.Name] = true
		if b.Containment {
			containment++
			if b.Requires != Always {
				t.Errorf("containment behaviour %s has a requirement, so something could skip it", b.Name)
			}
		}
	}
	if containment != 12 {
		t.Errorf("%d containment behaviours, want the 12 the issues list (10, then IPv6 link-local and node access)", containment)
	}
}
