package version

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/antifailure/af/cmd/af/internal/cmdtest"
	afversion "github.com/antifailure/af/version"
)

func TestVersion(t *testing.T) {
	r := cmdtest.Exec(t, cmdtest.Env{}, NewCmdVersion)
	if r.Err != nil || !strings.Contains(r.Out, "engine image "+afversion.LocalEngineImage) {
		t.Errorf("%v %q", r.Err, r.Out)
	}
	j := cmdtest.Exec(t, cmdtest.Env{JSON: true, Vars: map[string]string{"AF_ENGINE_IMAGE": "ghcr.io/acme/af-engine@sha256:1"}}, NewCmdVersion)
	var info afversion.Info
	if err := json.Unmarshal([]byte(j.Out), &info); err != nil || info.EngineImage != "ghcr.io/acme/af-engine@sha256:1" || info.EngineDigest != afversion.EngineDigest {
		t.Errorf("-o json: %v %s", err, j.Out)
	}
}
