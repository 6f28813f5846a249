package sourcedigest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestRecordedDigestIsCurrent(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatal("go is not on PATH")
	}
	d, err := Compute("../..")
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("../../version/engine_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, GoFile(d)) {
		t.Fatalf("version/engine_gen.go is stale (the sidecar or gate source changed; digest now %s): run make generate", d)
	}
}

// TestDigestFollowsTheSource copies the module, changes one sidecar file, and checks the
// digest changes, and that a file outside the sidecar and gate does not change it.
func TestDigestFollowsTheSource(t *testing.T) {
	dir := t.TempDir()
	cp := exec.Command("cp", "-a", "../../.", dir)
	if out, err := cp.CombinedOutput(); err != nil {
		t.Fatalf("copy: %v %s", err, out)
	}
	before, err := Compute(dir)
	if err != nil {
		t.Fatal(err)
	}
	readme := filepath.Join(dir, "README.md")
	if err := os.WriteFile(readme, []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if d, _ := Compute(dir); d != before {
		t.Errorf("README changed the digest")
	}
	f := filepath.Join(dir, "sidecar", "policy", "policy.go")
	b, _ := os.ReadFile(f)
	if err := os.WriteFile(f, append(b, []byte("\n// changed\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if d, _ := Compute(dir); d == before {
		t.Errorf("a sidecar change left the digest at %s", before)
	}
}
