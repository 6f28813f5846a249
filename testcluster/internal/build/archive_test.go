package build

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteArchiveIsADockerArchive(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.tar")
	img := Image{Ref: "af.test/x:1", Entrypoint: []string{"/tool"}, Files: map[string]string{"/usr/local/bin/tool": bin}, Symlinks: map[string]string{"/bin/sh": "busybox"}, Dirs: []string{"/tmp"}}
	if err := WriteArchive(img, out); err != nil {
		t.Fatal(err)
	}
	files := readTar(t, out)
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	if len(manifest) != 1 || manifest[0].RepoTags[0] != "af.test/x:1" || len(manifest[0].Layers) != 1 {
		t.Fatalf("manifest = %+v", manifest)
	}
	var config struct {
		Config struct{ Entrypoint []string }
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(files[manifest[0].Config], &config); err != nil {
		t.Fatalf("config: %v", err)
	}
	if len(config.Config.Entrypoint) != 1 || config.Config.Entrypoint[0] != "/tool" || len(config.RootFS.DiffIDs) != 1 {
		t.Fatalf("config = %+v", config)
	}
	layer := tar.NewReader(bytes.NewReader(files[manifest[0].Layers[0]]))
	seen := map[string]byte{}
	for {
		h, err := layer.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[h.Name] = h.Typeflag
	}
	for name, typ := range map[string]byte{"usr/": tar.TypeDir, "usr/local/bin/tool": tar.TypeReg, "bin/sh": tar.TypeSymlink, "tmp/": tar.TypeDir} {
		if seen[name] != typ {
			t.Errorf("layer entry %s: type %q, want %q (entries %v)", name, seen[name], typ, seen)
		}
	}
}

func readTar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = b
	}
}
