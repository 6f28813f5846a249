package images_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/antifailure/af/images"
	"github.com/antifailure/af/testcluster"
)

// TestPublishToTheLocalRegistry pushes to the test cluster's registry (Debian's
// docker-registry on loopback): by digest, a second publish of the same image uploads no layer
// bytes, and a pod on the cluster pulls the published reference and runs it.
func TestPublishToTheLocalRegistry(t *testing.T) {
	h := testcluster.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	reg, err := images.NewRegistry(h.Registry+"/af-test", true, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(1<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	first, err := reg.Publish(ctx, img, "random")
	if err != nil {
		t.Fatal(err)
	}
	digest, _ := img.Digest()
	if first.Ref != h.Registry+"/af-test/random@"+digest.String() {
		t.Errorf("ref %s is not by digest", first.Ref)
	}
	if first.LayerBytes < 2<<20 {
		t.Errorf("first publish uploaded %d layer bytes, want at least the 2 MiB of layers", first.LayerBytes)
	}
	second, err := reg.Publish(ctx, img, "random")
	if err != nil {
		t.Fatal(err)
	}
	if second.LayerBytes != 0 || second.Ref != first.Ref {
		t.Errorf("second publish: %d layer bytes, ref %s", second.LayerBytes, second.Ref)
	}
	t.Logf("first publish: %d bytes (%d of layers); second: %d bytes (%d of layers)", first.Uploaded, first.LayerBytes, second.Uploaded, second.LayerBytes)

	// Pods pull it by digest and run it: the test image (busybox, aftool), published.
	archive := filepath.Join(t.TempDir(), "test.tar")
	// Its own environment variable makes it an image of its own. A copy with the test image's
	// exact config, pulled from the registry by a pod, makes this node's containerd 1.6 unable
	// to start pods from af.test/aftest:1 afterwards (ErrImagePull while `ctr images ls` still
	// lists it: seen, and reproduced), breaking every later test that uses the test image.
	if err := h.WriteTestImage(ctx, archive, "af.test/publish-me:1", "AF_TEST_IMAGE=publish"); err != nil {
		t.Fatal(err)
	}
	runnable, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := reg.Publish(ctx, runnable, "runnable")
	if err != nil {
		t.Fatal(err)
	}
	name := runOnce(ctx, t, h, pub.Ref, "Always")
	out, err := h.Kubectl(ctx, "", "get", "pod", name, "-o", "jsonpath={.status.containerStatuses[0].imageID}")
	if err != nil || !strings.HasSuffix(out, pub.Ref[strings.Index(pub.Ref, "@")+1:]) {
		t.Errorf("the pod ran %q, want the published digest %s (%v)", out, pub.Ref, err)
	}
}

// TestPublishByContainerdImport imports into the test cluster's own containerd (what
// AF_CONTAINERD_ADDRESS selects on a single-node cluster): a pod that never pulls runs the
// imported name.
func TestPublishByContainerdImport(t *testing.T) {
	h := testcluster.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pub, err := images.For(images.Options{Context: "af-testcluster", Containerd: h.Containerd, Progress: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pub.Target(), "containerd at ") {
		t.Fatalf("publisher %s, want the containerd import", pub.Target())
	}
	archive := filepath.Join(t.TempDir(), "test.tar")
	if err := h.WriteTestImage(ctx, archive, "af.test/import-me:1", "AF_TEST_IMAGE=containerd-import"); err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pub.Publish(ctx, img, "af-test/imported")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.Ref, "af.local/af-test/imported:") {
		t.Errorf("imported as %s", p.Ref)
	}
	runOnce(ctx, t, h, p.Ref, "Never")
}

// runOnce runs image as a pod that echoes and exits, and waits for it to succeed; the pod
// is deleted when the test ends. It returns the pod's name.
func runOnce(ctx context.Context, t *testing.T, h *testcluster.Handle, image, pull string) string {
	t.Helper()
	name := fmt.Sprintf("af-image-%d", time.Now().UnixNano()%100000)
	pod := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  containers:
  - {name: main, image: %q, imagePullPolicy: %s, command: [sh, -c, "echo ran"]}
`, name, image, pull)
	if _, err := h.Kubectl(ctx, pod, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = h.Kubectl(context.Background(), "", "delete", "pod", name, "--wait=false") })
	if _, err := h.Kubectl(ctx, "", "wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/"+name, "--timeout=120s"); err != nil {
		t.Fatal(err)
	}
	return name
}
