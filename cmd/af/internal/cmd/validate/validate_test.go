package validate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/antifailure/af/cmd/af/internal/cmdtest"
	"github.com/antifailure/af/failure"
)

func TestValidate(t *testing.T) {
	if r := cmdtest.Exec(t, cmdtest.Env{}, NewCmdValidate); r.Err != nil {
		t.Errorf("a valid manifest: %v", r.Err)
	}
	bad := strings.Replace(cmdtest.Manifest, "replicas: 2", "replicas: -1", 1)
	r := cmdtest.Exec(t, cmdtest.Env{Manifest: bad, JSON: true}, NewCmdValidate)
	var got struct {
		Valid    bool `json:"valid"`
		Problems []struct {
			Path string `json:"path"`
		} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(r.Out), &got); err != nil || got.Valid || len(got.Problems) != 1 || got.Problems[0].Path != "services.api.replicas" {
		t.Errorf("-o json: %v %s", err, r.Out)
	}
	if e := failure.As(r.Err); r.Err == nil || (e != nil && e.Entry != failure.ManifestInvalid) {
		t.Errorf("want the manifest refused, got %v", r.Err)
	}
}
