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

// negative builds a negative control's report: the behaviours in escaped fail with an Escape
// line, results overrides others (action, or "fail-broken" / "fail-escape-broken"), and the
// marker is logged unless unmarked.
func negative(escaped []string, results map[string]string, unmarked bool) string {
	esc := map[string]bool{}
	for _, n := range escaped {
		esc[n] = true
	}
	s := &stream{}
	s.add("run", pkg, RootTest, "")
	if !unmarked {
		s.add("output", pkg, RootTest, "    conformance_cluster_test.go:99: "+NegativeControlMarker+": af's probe and gates are off\n")
	}
	result := func(name string) {
		s.add("run", pkg, name, "")
		action := results[name]
		switch {
		case action == "fail-broken":
			s.add("output", pkg, name, "    behaviours.go:344: "+Broken+" control: tcp x did not answer from outside every environment\n")
			action = "fail"
		case action == "fail-escape-broken":
			s.add("output", pkg, name, "    behaviours.go:362: "+Escape+" tcp x got through\n")
			s.add("output", pkg, name, "    behaviours.go:353: "+Broken+" dns store should work\n")
			action = "fail"
		case action == "fail":
			s.add("output", pkg, name, "    behaviours.go:521: second up: timeout\n")
		case esc[name] && action == "":
			s.add("output", pkg, name, "    behaviours.go:362: "+Escape+" tcp 198.51.100.1:7 got through: \"echo\"\n")
			action = "fail"
		case action == "":
			action = "pass"
		}
		s.add(action, pkg, name, "")
	}
	for _, b := range Roster {
		result(RootTest + "/" + b.Name)
	}
	s.add("fail", pkg, RootTest, "")
	result(StartupProof)
	s.add("fail", pkg, "", "")
	return s.String()
}

func withRoot(names []string) []string {
	var out []string
	for _, n := range names {
		if n == StartupProof {
			out = append(out, n)
		} else {
			out = append(out, RootTest+"/"+n)
		}
	}
	return out
}

func TestVerifyRefusalHolds(t *testing.T) {
	all := RouteBehaviours()
	if len(all) != 9 || all[len(all)-1] != StartupProof {
		t.Fatalf("route behaviours: %v, want the 8 containment behaviours that try a route by address and the startup proof", all)
	}
	c, err := VerifyRefusal(strings.NewReader(negative(withRoot(all), nil, false)), pkg, all)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Escaped) != 9 || c.Passed != len(Roster)-8 {
		t.Errorf("claim %s", c)
	}
	holes := []string{"egress/no-bypass-by-ipv6-link-local", "egress/no-node-access"}
	if _, err := VerifyRefusal(strings.NewReader(negative(withRoot(holes), nil, false)), pkg, holes); err != nil {
		t.Errorf("the holes' negative control: %v", err)
	}
}

func TestVerifyRefusalRefuses(t *testing.T) {
	all := RouteBehaviours()
	holes := []string{"egress/no-bypass-by-ipv6-link-local", "egress/no-node-access"}
	for _, c := range []struct {
		name    string
		report  string
		escapes []string
		reason  string
	}{
		// A broken cluster: the environment never came up, so every behaviour failed, none by an escape.
		{"nothing came up", negative(nil, func() map[string]string {
			m := map[string]string{}
			for _, b := range Roster {
				m[RootTest+"/"+b.Name] = "fail-broken"
			}
			m[StartupProof] = "fail-broken"
			return m
		}(), false), all, "failed, but not because a route got out"},
		{"DNS broken: a behaviour that is not containment failed", negative(withRoot(all), map[string]string{RootTest + "/up/starts-a-service": "fail"}, false), all,
			"up/starts-a-service failed, and this negative control's holes do not explain it: behaviours.go:521: second up: timeout"},
		{"an escape and a broken measurement", negative(withRoot(all), map[string]string{RootTest + "/egress/no-metadata": "fail-escape-broken"}, false), all,
			"failed by an escape, and also could not measure"},
		{"a route that should have got out did not", negative(withRoot(all[1:]), nil, false), all,
			"egress/no-policy-nothing-out passed: a route it tries should have got out"},
		{"the holes' run with another containment behaviour failing", negative(withRoot(append(holes, "egress/no-bypass-by-udp")), nil, false), holes,
			"egress/no-bypass-by-udp failed, and this negative control's holes do not explain it"},
		{"the runtime's own checks were on", negative(withRoot(all), nil, true), all, "the run is not a negative control's"},
		{"a behaviour never reached", strings.Replace(negative(withRoot(all), nil, false), `"Test":"TestConformance/down/idempotent"`, `"Test":"TestOther"`, -1), all,
			"never reached, so unmeasured: down/idempotent"},
	} {
		_, err := VerifyRefusal(strings.NewReader(c.report), pkg, c.escapes)
		var r *Refusal
		if !errors.As(err, &r) {
			t.Errorf("%s: accepted as a negative control (%v)", c.name, err)
			continue
		}
		if !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: reasons do not say %q:\n%v", c.name, c.reason, err)
		}
	}
	if _, err := VerifyRefusal(strings.NewReader(""), pkg, []string{"egress/no-token"}); err == nil || !strings.Contains(err.Error(), "not a behaviour that tries a route") {
		t.Errorf("egress/no-token named as an escape: %v", err)
	}
}

// TestVerifyRefusesANegativeControlAsAClaim: a run with the runtime's checks off claims nothing.
func TestVerifyRefusesANegativeControlAsAClaim(t *testing.T) {
	report := strings.Replace(good(nil, nil), `{"Action":"run","Package":"`+pkg+`","Test":"`+RootTest+`"}`,
		`{"Action":"run","Package":"`+pkg+`","Test":"`+RootTest+`"}`+"\n"+`{"Action":"output","Package":"`+pkg+`","Test":"`+RootTest+`","Output":"`+NegativeControlMarker+`\n"}`, 1)
	if _, err := Verify(strings.NewReader(report), pkg); err == nil || !strings.Contains(err.Error(), "negative control") {
		t.Errorf("a negative control's report was accepted as a claim: %v", err)
	}
}
