package status

import (
	"strings"
	"testing"

	"github.com/antifailure/af/cmd/af/internal/cmdtest"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/runtime/runtimetest"
)

func TestStatus(t *testing.T) {
	rt := &runtimetest.Fake{StatusResult: &afruntime.Status{Environment: "demo", Namespace: "af-env-demo", Exists: true,
		Services: []afruntime.ServiceStatus{{Name: "web", Ready: 2, Desired: 2, State: afruntime.StateRunning, CPU: "100m", Memory: "64Mi"}}}}
	r := cmdtest.Exec(t, cmdtest.Env{Runtime: rt}, NewCmdStatus, "--env", "demo")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if !strings.Contains(r.Out, "environment demo in namespace af-env-demo") || !strings.Contains(r.Out, "web      running  2/2    100m  64Mi") {
		t.Errorf("status:\n%s", r.Out)
	}
	if c := rt.Calls(); len(c) != 1 || c[0].Method != "Status" || c[0].Ref.ID != "demo" {
		t.Errorf("calls %+v", c)
	}
}

func TestStatusOfNothing(t *testing.T) {
	r := cmdtest.Exec(t, cmdtest.Env{Runtime: &runtimetest.Fake{}}, NewCmdStatus, "--env", "gone")
	if r.Err != nil || !strings.Contains(r.Out, "environment gone: not running") {
		t.Errorf("%v %q", r.Err, r.Out)
	}
}

// af status --pr N --repo O/R finds what the action made: the environment named with its
// owner (another repository of the same name had the short id first), and the short one
// where it is this repository's.
func TestStatusFindsWhatTheActionMade(t *testing.T) {
	envs := []afruntime.Environment{
		{ID: "shop-pr-12", Namespace: "af-env-shop-pr-12", Repository: "other/shop", PullRequest: 12},
		{ID: "acme-shop-pr-12", Namespace: "af-env-acme-shop-pr-12", Repository: "acme/shop", PullRequest: 12},
		{ID: "shop-pr-13", Namespace: "af-env-shop-pr-13", Repository: "acme/shop", PullRequest: 13},
	}
	for pr, want := range map[string]string{"12": "acme-shop-pr-12", "13": "shop-pr-13", "14": "shop-pr-14"} {
		rt := &runtimetest.Fake{Envs: envs}
		r := cmdtest.Exec(t, cmdtest.Env{Runtime: rt}, NewCmdStatus, "--pr", pr, "--repo", "acme/shop")
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		c := rt.Calls()
		if last := c[len(c)-1]; last.Method != "Status" || last.Ref.ID != want {
			t.Errorf("--pr %s: calls %+v, want the status of %s", pr, c, want)
		}
	}
}
