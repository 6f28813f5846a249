package down

import (
	"encoding/json"
	"testing"

	"github.com/antifailure/af/cmd/af/internal/cmdtest"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/runtime/runtimetest"
)

func TestDown(t *testing.T) {
	rt := &runtimetest.Fake{}
	r := cmdtest.Exec(t, cmdtest.Env{Runtime: rt, JSON: true, Vars: map[string]string{"GITHUB_REPOSITORY": "acme/shop"}}, NewCmdDown, "--pr", "12")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if c := rt.Calls(); len(c) != 1 || c[0].Method != "Down" || c[0].Ref.ID != "shop-pr-12" {
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

func TestDownPassesTheRuntimesRefusal(t *testing.T) {
	rt := &runtimetest.Fake{DownErr: failure.Newf(failure.NamespaceNotOurs, "namespace af-env-demo has no dev.antifailure.managed label")}
	r := cmdtest.Exec(t, cmdtest.Env{Runtime: rt}, NewCmdDown, "--env", "demo")
	if failure.CodeOf(r.Err) != failure.NamespaceNotOurs.Code || r.Out != "" {
		t.Errorf("want AF-RUN-045 and nothing on standard output, got %v %q", r.Err, r.Out)
	}
}
