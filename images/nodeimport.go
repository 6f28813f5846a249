package images

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/antifailure/af/failure"
)

// NodeImport loads images straight into the nodes of a kind or k3d cluster, with that tool's
// own command (kind load image-archive, k3d image import), or into the containerd of a node af
// runs on (ctr images import into the kubelet's namespace k8s.io). Pods run the imported name
// and never pull it.
type NodeImport struct {
	Tool string // TargetKind, TargetK3d or TargetContainerd
	// Cluster is the kind or k3d cluster's name, or containerd's socket.
	Cluster  string
	Progress func(format string, args ...any)
}

// Target names the cluster.
func (n *NodeImport) Target() string {
	if n.Tool == TargetContainerd {
		return "containerd at " + n.Cluster + " (import into the node)"
	}
	return n.Tool + " cluster " + n.Cluster + " (import into its nodes)"
}

// Command returns the command that imports archive into the cluster's nodes.
func (n *NodeImport) Command(archive string) []string {
	switch n.Tool {
	case TargetKind:
		return []string{"kind", "load", "image-archive", archive, "--name", n.Cluster}
	case TargetContainerd:
		return []string{"ctr", "--address", n.Cluster, "-n", "k8s.io", "images", "import", archive}
	}
	return []string{"k3d", "image", "import", archive, "--cluster", n.Cluster}
}

// Publish writes img as a docker archive named af.local/<name>:<digest-derived tag> and imports
// it. The tag is derived from the digest, so an unchanged image keeps its name.
func (n *NodeImport) Publish(ctx context.Context, img v1.Image, repo string) (Published, error) {
	digest, err := img.Digest()
	if err != nil {
		return Published{}, fmt.Errorf("image digest: %w", err)
	}
	tag, err := name.NewTag("af.local/" + repo + ":" + digest.Hex[:16])
	if err != nil {
		return Published{}, failure.Newf(failure.ManifestInvalid, "image name %s: %v", repo, err)
	}
	dir, err := os.MkdirTemp("", "af-import")
	if err != nil {
		return Published{}, err
	}
	defer os.RemoveAll(dir)
	archive := filepath.Join(dir, "image.tar")
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		return Published{}, fmt.Errorf("writing %s: %w", tag, err)
	}
	if err := n.ImportArchive(ctx, archive, repo); err != nil {
		return Published{}, err
	}
	return Published{Ref: tag.String()}, nil
}

// ImportArchive imports a docker archive that is already written; what names it in progress.
func (n *NodeImport) ImportArchive(ctx context.Context, archive, what string) error {
	argv := n.Command(archive)
	progress(n.Progress, "  %s: %s", what, strings.Join(argv, " "))
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return failure.New(failure.ImagePublish, fmt.Sprintf("%s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(out.String())), err).
			WithHint(fmt.Sprintf("af imports with the %s command: install it, or use a context whose nodes pull from runtime.registry.", argv[0]))
	}
	return nil
}
