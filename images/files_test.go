package images

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestFilesArchive: a Files image written as a docker archive reads back with its tag, its
// entrypoint and every entry of its one layer, and the same description makes the same digest.
func TestFilesArchive(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := Files{
		Paths: map[string]string{"/usr/local/bin/tool": bin}, Contents: map[string][]byte{"/etc/motd": []byte("hi\n")},
		Symlinks: map[string]string{"/bin/sh": "busybox"}, Dirs: []string{"/tmp"}, Entrypoint: []string{"/tool"},
	}
	img, err := spec.Image()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.tar")
	if err := WriteArchive(out, "af.test/x:1", img); err != nil {
		t.Fatal(err)
	}
	back, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatalf("not a docker archive: %v", err)
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(out) })
	if err != nil || len(m) != 1 || len(m[0].RepoTags) != 1 || m[0].RepoTags[0] != "af.test/x:1" {
		t.Fatalf("manifest %+v %v", m, err)
	}
	cf, err := back.ConfigFile()
	if err != nil || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/tool" {
		t.Fatalf("config %+v %v", cf, err)
	}
	layers, err := back.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %v %v", layers, err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	seen := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[h.Name] = h
	}
	for name, typ := range map[string]byte{"usr/": tar.TypeDir, "usr/local/bin/tool": tar.TypeReg, "etc/motd": tar.TypeReg, "bin/sh": tar.TypeSymlink, "tmp/": tar.TypeDir} {
		if h := seen[name]; h == nil || h.Typeflag != typ {
			t.Errorf("layer entry %s: %+v, want type %q", name, h, typ)
		}
	}
	if h := seen["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("/tmp is not sticky and world-writable: %+v", h)
	}
	again, err := spec.Image()
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("the same description made %s and %s", d1, d2)
	}
}
