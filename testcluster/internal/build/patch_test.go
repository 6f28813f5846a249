package build

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKubeNetworkPoliciesPatch applies the recipe's changes to the real upstream module (from
// the module proxy) and checks the copy: no nftables queue statement is left, every one of
// them asks the compat target instead, and the host-process config is read.
func TestKubeNetworkPoliciesPatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	if err := (&Builder{CacheDir: t.TempDir()}).patch(ctx, dir, KubeNetworkPolicies()); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, PatchDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, f := range []string{"pkg/networkpolicy/controller.go", "pkg/networkpolicy/dnsagent.go"} {
		if strings.Contains(read(f), "expr.Queue{") {
			t.Errorf("%s still has an nftables queue statement", f)
		}
	}
	if n := strings.Count(read("pkg/networkpolicy/controller.go"), "xtQueue("); n != 2 {
		t.Errorf("controller.go asks the compat target %d times, want 2", n)
	}
	if !strings.Contains(read("cmd/main.go"), "afHostConfig(rest.InClusterConfig)") || !strings.Contains(read("cmd/af_hostconfig.go"), "KUBECONFIG") {
		t.Errorf("the host-process config is not wired")
	}
}

// TestPatchRefusesMovedCode: an edit whose text is not in the file, as after an upstream
// change, fails the build with the file and the count, and adds no file over upstream's.
func TestPatchRefusesMovedCode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tests := []struct {
		name string
		edit func(*Patch)
		want string
	}{
		{"text gone", func(p *Patch) {
			p.Edits = append(p.Edits, Edit{File: "cmd/main.go", Old: "no such line in upstream", New: "x"})
		},
			"cmd/main.go has the text to replace 0 time(s), want 1"},
		{"count differs", func(p *Patch) { p.Edits[0].Count = 3 }, "has the text to replace 2 time(s), want 3"},
		{"file over upstream's", func(p *Patch) { p.Files["cmd/main.go"] = "package main\n" }, "cmd/main.go already exists upstream"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := KubeNetworkPolicies()
			files := map[string]string{}
			for k, v := range p.Patch.Files {
				files[k] = v
			}
			p.Patch.Files = files
			p.Patch.Edits = append([]Edit(nil), p.Patch.Edits...)
			tc.edit(p.Patch)
			err := (&Builder{CacheDir: t.TempDir()}).patch(ctx, t.TempDir(), p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestPatchChangesTheKey: the patch is part of what builds the program.
func TestPatchChangesTheKey(t *testing.T) {
	a, b := KubeNetworkPolicies(), KubeNetworkPolicies()
	b.Patch.Edits = append([]Edit(nil), b.Patch.Edits...)
	b.Patch.Edits[0].New += "\n"
	if a.Key() == b.Key() {
		t.Errorf("a changed edit keeps the cache key %s", a.Key())
	}
}
