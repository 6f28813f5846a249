package up

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/antifailure/af/cmd/af/internal/cmdtest"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/gate"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/runtime/runtimetest"
)

func TestUpAsksTheRuntime(t *testing.T) {
	rt := &runtimetest.Fake{UpResult: &afruntime.Result{Environment: "shop-pr-7", Namespace: "af-env-shop-pr-7",
		Probe: &gate.Result{Verdict: gate.Contained, Rounds: 3}, URLs: map[string]string{"web": "https://shop-pr-7-web.preview.test/"}}}
	r := cmdtest.Exec(t, cmdtest.Env{Runtime: rt, JSON: true}, NewCmdUp, "--pr", "7", "--repo", "acme/shop", "--image", "api=r/api@sha256:1")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	calls := rt.Calls()
	if len(calls) == 2 && calls[0].Method == "Environments" {
		calls = calls[1:] // the pull request's environment looked up first: there is none
	}
	if len(calls) != 1 || calls[0].Method != "Up" || calls[0].Ref.ID != "shop-pr-7" || calls[0].Spec.PullRequest != 7 ||
		calls[0].Ref.Repository != "acme/shop" || calls[0].Spec.Images["api"] != "r/api@sha256:1" {
		t.Fatalf("calls %+v", calls)
	}
	var got afruntime.Result
	if err := json.Unmarshal([]byte(r.Out), &got); err != nil || got.Namespace != "af-env-shop-pr-7" || got.URLs["web"] == "" {
		t.Errorf("-o json: %v %s", err, r.Out)
	}
}

// TestUpNotContained: the probe's table is printed before the refusal, whose code is the
// runtime's.
func TestUpNotContained(t *testing.T) {
	probe := &gate.Result{Verdict: gate.Escape, Rounds: 50, Routes: []gate.Attempt{{Route: gate.RouteLinkLocal, Target: "ff02::1+neighbours", Outcome: gate.Escaped, Detail: "fe80::1%eth0 answered"}}}
	rt := &runtimetest.Fake{UpResult: &afruntime.Result{Probe: probe}, UpErr: failure.Newf(failure.NotContained, "the probe got out by ipv6-link-local")}
	r := cmdtest.Exec(t, cmdtest.Env{Runtime: rt}, NewCmdUp, "--env", "demo")
	if failure.CodeOf(r.Err) != failure.NotContained.Code {
		t.Fatalf("want AF-RUN-043, got %v", r.Err)
	}
	if !strings.Contains(r.Out, "probe: escaped") || !strings.Contains(r.Out, "ipv6-link-local") {
		t.Errorf("the probe's table is not shown:\n%s", r.Out)
	}
}

func TestUpRefusesBadInputBeforeTheRuntime(t *testing.T) {
	for name, args := range map[string][]string{
		"an image without a service": {"--env", "demo", "--image", "r/web:1"},
		"a service named twice":      {"--env", "demo", "--image", "web=a:1", "--image", "web=b:1"},
		"an archive without a path":  {"--env", "demo", "--image-archive", "web="},
		"two names":                  {"--env", "demo", "--pr", "3", "--repo", "acme/shop"},
	} {
		rt := &runtimetest.Fake{}
		r := cmdtest.Exec(t, cmdtest.Env{Runtime: rt}, NewCmdUp, args...)
		if e := failure.As(r.Err); e == nil || e.Entry != failure.UsageInvalid {
			t.Errorf("%s: want AF-RUN-003, got %v", name, r.Err)
		}
		if len(rt.Calls()) != 0 {
			t.Errorf("%s: the runtime was asked: %+v", name, rt.Calls())
		}
	}
}
