package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/antifailure/af/testcluster/internal/build"
	"github.com/antifailure/af/testcluster/internal/layout"
)

// TestImageSpec is the test image: Debian's static busybox with its applets,
// and aftool. Exported so tests can build variants of it.
func TestImageSpec(ctx context.Context, ref, aftool string) (build.Image, error) {
	out, err := run(ctx, "/bin/busybox", "--list")
	if err != nil {
		return build.Image{}, fmt.Errorf("test image: %w", err)
	}
	links := map[string]string{}
	for _, applet := range strings.Fields(out) {
		if applet != "busybox" {
			links["/bin/"+applet] = "busybox"
		}
	}
	return build.Image{
		Ref:      ref,
		Cmd:      []string{"/usr/local/bin/aftool", "serve"},
		Files:    map[string]string{"/bin/busybox": "/bin/busybox", "/usr/local/bin/aftool": aftool},
		Symlinks: links,
		Dirs:     []string{"/tmp", "/etc", "/proc", "/sys", "/dev", "/root"},
	}, nil
}

// buildImages writes the cluster's image archives and returns their paths.
func (c *Cluster) buildImages(ctx context.Context) ([]string, error) {
	dir := filepath.Join(c.dirs.Cache, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("images: %w", err)
	}
	test, err := TestImageSpec(ctx, TestImage, c.bins.aftool)
	if err != nil {
		return nil, err
	}
	imgs := []build.Image{
		{Ref: PauseImage, Entrypoint: []string{"/pause"}, Files: map[string]string{"/pause": c.bins.afpause}},
		test,
		{Ref: CoreDNSImage, Entrypoint: []string{"/coredns"}, Files: map[string]string{"/coredns": c.bins.coreDNS}, Dirs: []string{"/tmp"}},
	}
	if c.bins.traefik != "" {
		imgs = append(imgs, build.Image{Ref: TraefikImage, Entrypoint: []string{"/traefik"}, Files: map[string]string{"/traefik": c.bins.traefik}, Dirs: []string{"/tmp", "/etc"}})
	}
	var paths []string
	for _, img := range imgs {
		name := strings.NewReplacer("/", "_", ":", "_").Replace(img.Ref) + ".tar"
		p := filepath.Join(dir, name)
		if err := build.WriteArchive(img, p); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// ImportImage loads a docker-archive tarball into the cluster's containerd
// (namespace k8s.io), where the kubelet finds it.
func ImportImage(ctx context.Context, dirs layout.Dirs, archive string) error {
	if _, err := run(ctx, "ctr", "--address", dirs.ContainerdSocket(), "-n", "k8s.io", "images", "import", archive); err != nil {
		return fmt.Errorf("import %s: %w", archive, err)
	}
	return nil
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
