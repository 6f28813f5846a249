package engineimage

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/antifailure/af/cmd/af/internal/cmdtest"
	"github.com/antifailure/af/failure"
)

func TestEngineImage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "af")
	if err := os.WriteFile(bin, []byte("not really af"), 0o755); err != nil {
		t.Fatal(err)
	}
	tar := filepath.Join(dir, "engine.tar")
	r := cmdtest.Exec(t, cmdtest.Env{}, NewCmdEngineImage, "--binary", bin, "--tar", tar, "--oci", filepath.Join(dir, "oci"))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	img, err := tarball.ImageFromPath(tar, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cf, err := img.ConfigFile(); err != nil || cf.Config.Entrypoint[0] != "/af" || cf.Config.User != "65532:65532" {
		t.Errorf("config %+v %v", cf, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "oci", "index.json")); err != nil {
		t.Errorf("no OCI layout: %v", err)
	}
	if r := cmdtest.Exec(t, cmdtest.Env{}, NewCmdEngineImage); failure.CodeOf(r.Err) != failure.UsageInvalid.Code {
		t.Errorf("no output named: %v", r.Err)
	}
}
