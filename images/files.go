package images

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"runtime"
	"slices"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Files describes a one-layer image assembled without a container daemon: files from this
// machine or from memory, symbolic links and empty directories. The same description always
// makes the same image digest (fixed times, sorted entries), which af's engine image and the
// test cluster's images rely on.
type Files struct {
	// Paths maps a path inside the image to a file on this machine, copied with Mode.
	Paths map[string]string
	// Contents maps a path inside the image to its bytes, written with Mode.
	Contents map[string][]byte
	// Mode is the mode of every file (default 0755).
	Mode int64
	// Symlinks maps a path inside the image to its target.
	Symlinks map[string]string
	// Dirs are empty directories to create (mode 01777 for /tmp, 0755 otherwise).
	Dirs []string

	Entrypoint, Cmd, Env []string
	User, WorkingDir     string
	Labels               map[string]string
	// OCI makes an OCI image (manifest and config media types); default Docker's.
	OCI bool
}

// epoch is every entry's time: the same files, the same digest.
var epoch = time.Unix(0, 0).UTC()

// Image assembles the image.
func (f Files) Image() (v1.Image, error) {
	data, err := f.layer()
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	base := empty.Image
	if f.OCI {
		base = mutate.MediaType(base, types.OCIManifestSchema1)
	}
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, err
	}
	if f.OCI {
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint, cf.Config.Cmd = f.Entrypoint, f.Cmd
	cf.Config.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}, f.Env...)
	cf.Config.User, cf.Config.WorkingDir, cf.Config.Labels = f.User, f.WorkingDir, f.Labels
	return mutate.ConfigFile(img, cf)
}

func (f Files) layer() ([]byte, error) {
	mode := f.Mode
	if mode == 0 {
		mode = 0o755
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	made := map[string]bool{}
	header := func(h *tar.Header) error {
		h.ModTime, h.Format = epoch, tar.FormatPAX
		return tw.WriteHeader(h)
	}
	// parents writes the directories above p that are not written yet, outermost first.
	parents := func(p string) error {
		var chain []string
		for d := path.Dir(p); d != "/" && d != "." && !made[d]; d = path.Dir(d) {
			chain = append(chain, d)
		}
		for i := len(chain) - 1; i >= 0; i-- {
			made[chain[i]] = true
			if err := header(&tar.Header{Typeflag: tar.TypeDir, Name: chain[i][1:] + "/", Mode: 0o755}); err != nil {
				return err
			}
		}
		return nil
	}
	for _, d := range sorted(f.Dirs) {
		// Each directory once (docker load refuses a path written twice); /tmp sticky and
		// world-writable.
		if err := parents(d); err != nil {
			return nil, err
		}
		if made[d] {
			continue
		}
		made[d] = true
		dirMode := int64(0o755)
		if d == "/tmp" {
			dirMode = 0o1777
		}
		if err := header(&tar.Header{Typeflag: tar.TypeDir, Name: d[1:] + "/", Mode: dirMode}); err != nil {
			return nil, err
		}
	}
	files := map[string]func() ([]byte, error){}
	for dst, src := range f.Paths {
		files[dst] = func() ([]byte, error) { return os.ReadFile(src) }
	}
	for dst, b := range f.Contents {
		files[dst] = func() ([]byte, error) { return b, nil }
	}
	for _, dst := range slices.Sorted(maps.Keys(files)) {
		data, err := files[dst]()
		if err != nil {
			return nil, err
		}
		if err := parents(dst); err != nil {
			return nil, err
		}
		if err := header(&tar.Header{Typeflag: tar.TypeReg, Name: dst[1:], Size: int64(len(data)), Mode: mode}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	for _, dst := range slices.Sorted(maps.Keys(f.Symlinks)) {
		if err := parents(dst); err != nil {
			return nil, err
		}
		if err := header(&tar.Header{Typeflag: tar.TypeSymlink, Name: dst[1:], Linkname: f.Symlinks[dst], Mode: 0o777}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteArchive writes img as a docker archive (what `docker load` and `ctr images import`
// read) tagged ref at path, replacing it whole or not at all.
func WriteArchive(path, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("image %s: %w", ref, err)
	}
	return os.Rename(tmp, path)
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
