package down

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/antifailure/af/cmd/af/internal/cmdtest"
	"github.com/antifailure/af/failure"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/runtime/runtimetest"
)

func TestDown(t *testing.T) {
	rt := &runtimetest.Fake{}
	r := cmdtest.Exec(t, cmdtest.Env{Runtime: rt, JSON: true, Vars: map[string]string{"GITHUB_REPOSITORY": "acme/shop"}}, NewCmdDown, "--pr", "12")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	// The pull request's environment is looked up first (as the action may have named it).
	if c := rt.Calls(); len(c) != 2 || c[0].Method != "Environments" || c[1].Method != "Down" || c[1].Ref.ID != "shop-pr-12" {
		t.Fatalf("calls %+v", c)
	}
	var got struct {
		Environment string `json:"environment"`
		Removed     bool   `json:"removed"`
	}
	if err := json.Unmarshal([]byte(r.Out), &got); err != nil || got.Environment != "shop-pr-12" || !got.Removed {
		t.Errorf("-o json: %v %s", err, r.Out)
	}
}

// TestDownFindsTheOwnersEnvironment: a pull request whose environment the action named with
// its owner (another repository of the same name had the short id) is found by --pr and
// --repo, and that one is taken down, not the other repository's.
func TestDownFindsTheOwnersEnvironment(t *testing.T) {
	rt := &runtimetest.Fake{Envs: []afruntime.Environment{
		{ID: "shop-pr-12", Namespace: "af-env-shop-pr-12", Repository: "other/shop", PullRequest: 12},
		{ID: "acme-shop-pr-12", Namespace: "af-env-acme-shop-pr-12", Repository: "acme/shop", PullRequest: 12},
	}}
	r := cmdtest.Exec(t, cmdtest.Env{Runtime: rt}, NewCmdDown, "--pr", "12", "--repo", "acme/shop")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if c := rt.Calls(); len(c) != 2 || c[1].Method != "Down" || c[1].Ref.ID != "acme-shop-pr-12" {
		t.Fatalf("calls %+v, want the owner-qualified environment taken down", c)
	}
	if !strings.Contains(r.ErrOut, "pull request #12's environment is acme-shop-pr-12") {
		t.Errorf("af down did not say which environment the pull request has:\n%s", r.ErrOut)
	}
}

func TestDownPassesTheRuntimesRefusal(t *testing.T) {
	rt := &runtimetest.Fake{DownErr: failure.Newf(failure.NamespaceNotOurs, "namespace af-env-demo has no dev.antifailure.managed label")}
	r := cmdtest.Exec(t, cmdtest.Env{Runtime: rt}, NewCmdDown, "--env", "demo")
	if failure.CodeOf(r.Err) != failure.NamespaceNotOurs.Code || r.Out != "" {
		t.Errorf("want AF-RUN-045 and nothing on standard output, got %v %q", r.Err, r.Out)
	}
}
