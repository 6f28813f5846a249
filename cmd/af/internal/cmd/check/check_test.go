package check

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/antifailure/af/cmd/af/internal/cmdtest"
	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/gate"
	"github.com/antifailure/af/harden"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/runtime/runtimetest"
)

// The command's part: the check's verdict read into an exit status and a failure, the text for
// people and the JSON for pipelines. The check itself runs on the test cluster
// (deploy/harden_cluster_test.go, runtime/kubernetes' TestCheck*).
func TestCheckVerdicts(t *testing.T) {
	contained := &afruntime.Check{Context: "c", Namespace: "af-env-af-check-1", Removed: true,
		Cluster: []afruntime.Fact{{Name: "enforcer", Value: "kube-router", From: "deploy/harden"}},
		Probe:   &gate.Result{Verdict: gate.Contained, Routes: []gate.Attempt{{Route: gate.RouteTCP, Target: "198.51.100.10:80", Outcome: gate.Denied}}}}
	open := &afruntime.Check{Context: "c", Namespace: "af-env-af-check-2", Removed: true,
		Probe:  &gate.Result{Verdict: gate.Escape, Routes: []gate.Attempt{{Route: gate.RouteLinkLocal, Target: "ff02::1+neighbours", Outcome: gate.Escaped}}},
		Advice: harden.Advise([]harden.Open{{Route: gate.RouteLinkLocal, Target: "ff02::1+neighbours"}}, harden.Seen{Enforcer: harden.KubeRouter})}
	pullErr := failure.Newf(failure.NotReady, "image cannot be pulled")
	noVerdict := &afruntime.Check{Context: "c", Namespace: "af-env-af-check-3", Error: pullErr.Error(), Err: pullErr}
	for _, c := range []struct {
		name  string
		check *afruntime.Check
		json  bool
		code  string // "" for success
		out   []string
	}{
		{"contained", contained, false, "", []string{"contained: every route denied", "enforcer", "kube-router"}},
		{"contained, json", contained, true, "", []string{`"contained": true`, `"verdict": "contained"`}},
		{"a route open", open, false, "AF-RUN-059", []string{"1. open: ipv6-link-local (ff02::1+neighbours)", "fix:", "deploy/harden/harden.yaml"}},
		{"a route open, json", open, true, "AF-RUN-059", []string{`"contained": false`, `"advice"`, `"routes": [`}},
		{"no verdict: the failure that stopped it", noVerdict, false, "AF-RUN-004", []string{"no verdict"}},
		{"namespace left behind", &afruntime.Check{Namespace: "af-env-af-check-4", Probe: contained.Probe}, false, "", []string{"NOT removed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := cmdtest.Exec(t, cmdtest.Env{Runtime: &runtimetest.Fake{CheckResult: c.check}, JSON: c.json}, NewCmdCheck)
			switch {
			case c.code == "" && r.Err != nil:
				t.Fatalf("err %v", r.Err)
			case c.code != "":
				var rep *factory.Reported
				if errors.As(r.Err, &rep) != c.json {
					t.Errorf("-o json %v: error %T (the JSON is the report, the failure only the exit)", c.json, r.Err)
				}
				if fe := failure.As(r.Err); fe == nil || string(fe.Entry.Code) != c.code {
					t.Fatalf("err %v, want %s", r.Err, c.code)
				}
			}
			for _, w := range c.out {
				if !strings.Contains(r.Out, w) {
					t.Errorf("output lacks %q:\n%s", w, r.Out)
				}
			}
			if c.json {
				var v map[string]any
				if err := json.Unmarshal([]byte(r.Out), &v); err != nil {
					t.Errorf("-o json is not JSON: %v", err)
				}
			}
		})
	}
	// A runtime that cannot check says so.
	r := cmdtest.Exec(t, cmdtest.Env{Runtime: &runtimetest.Fake{}}, NewCmdCheck)
	if fe := failure.As(r.Err); fe == nil || fe.Entry != failure.RuntimeCannot {
		t.Errorf("a runtime without a Checker: %v", r.Err)
	}
}
