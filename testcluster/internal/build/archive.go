package build

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Image describes a one-layer image assembled from files on this machine.
type Image struct {
	// Ref is the image's name, e.g. "af.test/aftest:1".
	Ref        string
	Entrypoint []string
	Cmd        []string
	Env        []string
	// Files maps a path inside the image to a file on this machine (copied with mode 0755).
	Files map[string]string
	// Symlinks maps a path inside the image to its target.
	Symlinks map[string]string
	// Dirs are empty directories to create (mode 01777 for /tmp, 0755 otherwise).
	Dirs []string
}

// WriteArchive writes img as a docker-archive tarball (the format `docker save`
// writes and `ctr images import` reads) at path.
func WriteArchive(img Image, path string) error {
	layer, err := layerTar(img)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	diffID := sha256.Sum256(layer)
	config := map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC().Format(time.RFC3339),
		"config": map[string]any{
			"Entrypoint": img.Entrypoint,
			"Cmd":        img.Cmd,
			"Env":        append([]string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}, img.Env...),
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
	}
	configJSON, err := json.Marshal(config)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	configSum := sha256.Sum256(configJSON)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	layerName := hex.EncodeToString(diffID[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{img.Ref}, "Layers": []string{layerName}}})
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	tw := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{configName, configJSON}, {layerName, layer}, {"manifest.json", manifest}} {
		if err := writeBytes(tw, e.name, e.data, 0o644); err != nil {
			f.Close()
			return fmt.Errorf("image %s: %w", img.Ref, err)
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	return os.Rename(tmp, path)
}

func layerTar(img Image) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	mkdirs := func(p string) error {
		var chain []string
		for d := filepath.Dir(p); d != "/" && d != "." && !dirs[d]; d = filepath.Dir(d) {
			chain = append(chain, d)
		}
		for i := len(chain) - 1; i >= 0; i-- {
			dirs[chain[i]] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: chain[i][1:] + "/", Mode: 0o755}); err != nil {
				return err
			}
		}
		return nil
	}
	for _, d := range sorted(img.Dirs) {
		if err := mkdirs(d + "/x"); err != nil {
			return nil, err
		}
		if d == "/tmp" {
			// Written again with the sticky, world-writable mode; the later entry wins.
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777}); err != nil {
				return nil, err
			}
		}
	}
	for _, dst := range sortedKeys(img.Files) {
		data, err := os.ReadFile(img.Files[dst])
		if err != nil {
			return nil, err
		}
		if err := mkdirs(dst); err != nil {
			return nil, err
		}
		if err := writeBytes(tw, dst[1:], data, 0o755); err != nil {
			return nil, err
		}
	}
	for _, dst := range sortedKeys(img.Symlinks) {
		if err := mkdirs(dst); err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: dst[1:], Linkname: img.Symlinks[dst], Mode: 0o777}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeBytes(tw *tar.Writer, name string, data []byte, mode int64) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)), Mode: mode}); err != nil {
		return err
	}
	_, err := io.Copy(tw, bytes.NewReader(data))
	return err
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
