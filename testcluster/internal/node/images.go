package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/antifailure/af/images"
	"github.com/antifailure/af/testcluster/internal/build"
	"github.com/antifailure/af/testcluster/internal/layout"
)

// TestImageSpec is the test image: Debian's static busybox with its applets,
// and aftool. Exported so tests can build variants of it.
func TestImageSpec(ctx context.Context, aftool string) (images.Files, error) {
	out, err := run(ctx, "/bin/busybox", "--list")
	if err != nil {
		return images.Files{}, fmt.Errorf("test image: %w", err)
	}
	links := map[string]string{}
	for _, applet := range strings.Fields(out) {
		if applet != "busybox" {
			links["/bin/"+applet] = "busybox"
		}
	}
	return images.Files{
		Cmd:      []string{"/usr/local/bin/aftool", "serve"},
		Paths:    map[string]string{"/bin/busybox": "/bin/busybox", "/usr/local/bin/aftool": aftool},
		Symlinks: links,
		Dirs:     []string{"/tmp", "/etc", "/proc", "/sys", "/dev", "/root"},
	}, nil
}

// WriteImage writes the image spec describes as a docker archive tagged ref at path.
func WriteImage(spec images.Files, ref, path string) error {
	img, err := spec.Image()
	if err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	return images.WriteArchive(path, ref, img)
}

// buildImages writes the cluster's image archives and returns their paths.
func (c *Cluster) buildImages(ctx context.Context) ([]string, error) {
	dir := filepath.Join(c.dirs.Cache, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	test, err := TestImageSpec(ctx, c.bins.aftool)
	if err != nil {
		return nil, err
	}
	type named struct {
		ref  string
		spec images.Files
	}
	imgs := []named{
		{PauseImage, images.Files{Entrypoint: []string{"/pause"}, Paths: map[string]string{"/pause": c.bins.afpause}}},
		{TestImage, test},
		{CoreDNSImage, images.Files{Entrypoint: []string{"/coredns"}, Paths: map[string]string{"/coredns": c.bins.coreDNS}, Dirs: []string{"/tmp"}}},
	}
	if c.bins.traefik != "" {
		imgs = append(imgs, named{TraefikImage, images.Files{Entrypoint: []string{"/traefik"}, Paths: map[string]string{"/traefik": c.bins.traefik}, Dirs: []string{"/tmp", "/etc"}}})
	}
	var paths []string
	for _, img := range imgs {
		name := strings.NewReplacer("/", "_", ":", "_").Replace(img.ref) + ".tar"
		p := filepath.Join(dir, name)
		if err := WriteImage(img.spec, img.ref, p); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// ImportImage loads a docker-archive tarball into the cluster's containerd
// (namespace k8s.io), where the kubelet finds it.
func ImportImage(ctx context.Context, dirs layout.Dirs, archive string) error {
	_, err := importOnce(ctx, dirs, archive, "")
	return err
}

// importOnce imports archive into the node's containerd, one import at a time on the machine
// (ctr refuses an image that another import of the same name is writing: "already exists").
// With a key, an archive of that key is imported once per bring-up (the marker lives in the
// cluster's run directory, which down removes); imported says whether this call did it.
func importOnce(ctx context.Context, dirs layout.Dirs, archive, key string) (imported bool, err error) {
	unlock, err := build.LockFile(ctx, filepath.Join(dirs.Run, "import.lock"))
	if err != nil {
		return false, err
	}
	defer unlock()
	marker := filepath.Join(dirs.Run, "imported", key)
	if key != "" {
		if _, err := os.Stat(marker); err == nil {
			return false, nil
		}
	}
	imp := images.NodeImport{Tool: images.TargetContainerd, Cluster: dirs.ContainerdSocket()}
	if err := imp.ImportArchive(ctx, archive, filepath.Base(archive)); err != nil {
		return false, fmt.Errorf("import %s: %w", archive, err)
	}
	if key != "" {
		if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
			return true, err
		}
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			return true, err
		}
	}
	return true, nil
}

// ImportImageOnce is ImportImage for an archive whose content key says what it holds: one
// already imported under that key since the cluster came up is not imported again.
func ImportImageOnce(ctx context.Context, dirs layout.Dirs, archive, key string) (bool, error) {
	return importOnce(ctx, dirs, archive, key)
}

// Done reports whether work under key was marked done (MarkDone) since the cluster came up.
func Done(dirs layout.Dirs, key string) bool {
	_, err := os.Stat(filepath.Join(dirs.Run, "imported", key))
	return err == nil
}

// MarkDone marks work under key done until the cluster goes down.
func MarkDone(dirs layout.Dirs, key string) error {
	marker := filepath.Join(dirs.Run, "imported", key)
	if err := os.MkdirAll(filepath.Dir(marker), 0o755); err != nil {
		return err
	}
	return os.WriteFile(marker, nil, 0o644)
}

// PushImage loads a docker-archive tarball holding image ref into a staging
// containerd namespace (not the kubelet's) and pushes it to the local registry
// as RegistryAddr/repo, so that a pod can only get it by pulling.
func PushImage(ctx context.Context, dirs layout.Dirs, archive, ref, repo string) (string, error) {
	remote := layout.RegistryAddr + "/" + repo
	base := []string{"--address", dirs.ContainerdSocket(), "-n", "af-staging"}
	steps := [][]string{
		append(append([]string{}, base...), "images", "import", archive),
		append(append([]string{}, base...), "images", "tag", "--force", ref, remote),
		append(append([]string{}, base...), "images", "push", "--plain-http", remote),
		append(append([]string{}, base...), "images", "rm", ref, remote),
	}
	for _, s := range steps {
		if _, err := run(ctx, "ctr", s...); err != nil {
			return "", fmt.Errorf("push %s: %w", remote, err)
		}
	}
	return remote, nil
}
