package sidecar

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/antifailure/af/cmd/af/internal/cmdtest"
	"github.com/antifailure/af/failure"
)

// TestSidecarRefusesItsConfiguration: without a file, or with one that is wrong, the sidecar
// opens no port and says why with the catalogue's code.
func TestSidecarRefusesItsConfiguration(t *testing.T) {
	if r := cmdtest.Exec(t, cmdtest.Env{}, NewCmdSidecar); failure.CodeOf(r.Err) != failure.UsageInvalid.Code {
		t.Errorf("no --config: %v", r.Err)
	}
	bad := filepath.Join(t.TempDir(), "sidecar.yaml")
	if err := os.WriteFile(bad, []byte("environment: e\nnamespace: n\ncluster_resolver: nowhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cmdtest.Exec(t, cmdtest.Env{}, NewCmdSidecar, "--config", bad)
	if failure.CodeOf(r.Err) != failure.SidecarConfigInvalid.Code || !strings.Contains(r.Err.Error(), "cluster_resolver") {
		t.Errorf("a bad configuration: %v", r.Err)
	}
}
