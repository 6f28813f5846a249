package engine

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/antifailure/af/internal/afbuild"
	"github.com/antifailure/af/internal/testreq"
	"github.com/antifailure/af/version"
)

// buildAF builds the real static af binary, stripped as the release's is.
func buildAF(t *testing.T) string {
	t.Helper()
	return afbuild.Binary(t, afbuild.LDFlags("-s -w"))
}

type written struct {
	Image      string
	Digest     string
	LayerBytes int64 `json:"layer_bytes"`
}

func writeImage(t *testing.T, bin, dir string) written {
	t.Helper()
	out, err := exec.Command(bin, "engine-image", "--tar", filepath.Join(dir, "engine.tar"), "--oci", filepath.Join(dir, "oci"), "-o", "json").CombinedOutput()
	if err != nil {
		t.Fatalf("af engine-image: %v\n%s", err, out)
	}
	var w written
	if err := json.Unmarshal(out, &w); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return w
}

func mustHash(t *testing.T, s string) v1.Hash {
	t.Helper()
	h, err := v1.NewHash(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestEngineImage(t *testing.T) {
	bin := buildAF(t)
	binInfo, _ := os.Stat(bin)
	dir := t.TempDir()
	w := writeImage(t, bin, dir)
	if w.Image != "ghcr.io/antifailure/af-engine:"+version.EngineDigest {
		t.Fatalf("image %q", w.Image)
	}
	tag, _ := name.NewTag(w.Image)
	img, err := tarball.ImageFromPath(filepath.Join(dir, "engine.tar"), &tag)
	if err != nil {
		t.Fatal(err)
	}
	// The docker archive carries its own (docker) manifest; the config is the same image's.
	idxImg, err := layout.ImageIndexFromPath(filepath.Join(dir, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	ociImg, err := idxImg.Image(mustHash(t, w.Digest))
	if err != nil {
		t.Fatal(err)
	}
	c1, _ := img.ConfigName()
	c2, _ := ociImg.ConfigName()
	if c1 != c2 {
		t.Errorf("the archive's config %s differs from the layout's %s", c1, c2)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cf.Config.Entrypoint, " ") != "/af" || cf.Config.User != User || cf.OS != "linux" || cf.Config.Labels["dev.antifailure.source-digest"] != version.EngineDigest {
		t.Errorf("config = %+v", cf.Config)
	}
	layers, _ := img.Layers()
	if len(layers) != 1 {
		t.Fatalf("%d layers", len(layers))
	}
	rc, _ := layers[0].Uncompressed()
	tr := tar.NewReader(rc)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name == "af" && (h.Size != binInfo.Size() || h.Uid != 0 || h.Mode&0o111 == 0) {
			t.Errorf("af in the image: %+v", h)
		}
	}
	rc.Close()
	if strings.Join(names, ",") != "af" {
		t.Errorf("the image holds %v; only af belongs in it", names)
	}
	// The OCI layout holds the same image under its name.
	idx, err := layout.ImageIndexFromPath(filepath.Join(dir, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	if len(im.Manifests) != 1 || im.Manifests[0].Digest.String() != w.Digest || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != w.Image {
		t.Errorf("layout index = %+v", im.Manifests)
	}
	// The same binary makes the same image.
	again := writeImage(t, bin, t.TempDir())
	if again.Digest != w.Digest {
		t.Errorf("not reproducible: %s then %s", w.Digest, again.Digest)
	}
	t.Logf("engine image %s: manifest digest %s, %d bytes compressed (binary %d bytes)", w.Image, w.Digest, w.LayerBytes, binInfo.Size())
}

// TestEngineImageRunsInContainerd imports the archive into a real containerd and runs the gate
// from it. It needs containerd: the test cluster's (make test starts it) or AF_CONTAINERD_ADDRESS.
func TestEngineImageRunsInContainerd(t *testing.T) {
	// A socket file alone proves nothing: one left by a cluster that was killed is still there
	// (connection refused). So the test runs when asked to, and then fails if nothing answers.
	addr := os.Getenv("AF_CONTAINERD_ADDRESS")
	if addr == "" {
		if !testreq.ClusterPhase() {
			testreq.Elsewhere(t, "needs a containerd; make test runs this with the test cluster's (AF_TESTCLUSTER=1), or set AF_CONTAINERD_ADDRESS")
		}
		addr = "/run/af-testcluster/containerd/containerd.sock"
	}
	testreq.Tools(t, "ctr")
	bin := buildAF(t)
	dir := t.TempDir()
	w := writeImage(t, bin, dir)
	ns := "af-engine-test"
	ctr := func(args ...string) (string, error) {
		out, err := exec.Command("ctr", append([]string{"--address", addr, "--namespace", ns}, args...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := ctr("images", "import", filepath.Join(dir, "engine.tar")); err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	// ctr names an image by its full reference: a name without a registry is Docker Hub's.
	ref := w.Image
	if first, _, _ := strings.Cut(ref, "/"); !strings.ContainsAny(first, ".:") {
		ref = "docker.io/" + ref
	}
	t.Cleanup(func() { _, _ = ctr("images", "rm", ref) })
	id := "af-engine-test-" + version.EngineDigest[:8]
	_, _ = ctr("containers", "rm", id)
	out, err := ctr("run", "--rm", ref, id, "/af", "gate", "--help")
	if err != nil || !strings.Contains(out, "Keep application code from starting") && !strings.Contains(out, "sidecar") {
		t.Fatalf("af gate --help in containerd: %v\n%s", err, out)
	}
	out, _ = ctr("run", "--rm", ref, id+"-id", "/af", "version")
	if !strings.Contains(out, version.EngineDigest) {
		t.Errorf("af version in the image: %s", out)
	}
}
