package version_test

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/antifailure/af/internal/afbuild"
	"github.com/antifailure/af/version"
)

// TestReleasePinsTheImages runs hack/release.sh on a clone of this repository against a
// registry on loopback: the action's image is pushed, action.yml and the App's Deployment name
// it by digest in one commit after the one built, tagged with the release; the registry serves
// exactly that digest, and the /af inside says the release's version and the commit it was
// built from. A second release of the same version, a release of another version and one of a
// changed tree are refused, changing nothing.
func TestReleasePinsTheImages(t *testing.T) {
	root, err := afbuild.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/antifailure/af"

	clone := filepath.Join(t.TempDir(), "af")
	git(t, "", "clone", "-q", root, clone)
	source := git(t, clone, "rev-parse", "HEAD")
	release := func(v string) (string, string, error) {
		cmd := exec.Command("hack/release.sh", v)
		cmd.Dir = clone
		cmd.Env = append(os.Environ(), "AF_RELEASE_REPOSITORY="+repo, "DOCKER_CONFIG="+t.TempDir(),
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t.test", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t.test")
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return strings.TrimSpace(out.String()), errOut.String(), err
	}

	// Refused before anything is built or pushed: another version than version.Release.
	if _, errOut, err := release("v9.9.9"); err == nil || !strings.Contains(errOut, "is not version.Release") {
		t.Fatalf("a release of another version: %v\n%s", err, errOut)
	}

	pinned, errOut, err := release(version.Release)
	if err != nil {
		t.Fatalf("hack/release.sh %s: %v\n%s", version.Release, err, errOut)
	}
	if !regexp.MustCompile(`^` + regexp.QuoteMeta(repo) + `@sha256:[0-9a-f]{64}$`).MatchString(pinned) {
		t.Fatalf("the release printed %q, not %s by digest\n%s", pinned, repo, errOut)
	}
	tagged := git(t, clone, "rev-parse", version.Release+"^{commit}")
	if head := git(t, clone, "rev-parse", "HEAD"); tagged != head || git(t, clone, "rev-parse", "HEAD^") != source {
		t.Fatalf("tag %s at %s, HEAD %s: want the tag on one commit after %s", version.Release, tagged, head, source)
	}
	if changed := git(t, clone, "diff", "--numstat", "HEAD^", "HEAD"); changed != "1\t1\taction.yml\n1\t1\tdeploy/app/deployment.yaml\n1\t1\tdeploy/harden/harden.yaml\n1\t1\tdeploy/harden/uninstall.yaml" {
		t.Errorf("the release commit changed\n%s\nwant one line of action.yml, of deploy/app/deployment.yaml and of each of deploy/harden's", changed)
	}
	for file, want := range map[string]string{
		"action.yml":                   "\n  image: docker://" + pinned + " # " + version.Release + "\n",
		"deploy/app/deployment.yaml":   "\n          image: " + pinned + " # " + version.Release + "\n",
		"deploy/harden/harden.yaml":    "\n          image: " + pinned + " # " + version.Release + "\n",
		"deploy/harden/uninstall.yaml": "\n          image: " + pinned + " # " + version.Release + "\n",
	} {
		if b, err := os.ReadFile(filepath.Join(clone, file)); err != nil || !strings.Contains(string(b), want) {
			t.Errorf("%s after the release lacks %q (%v)", file, strings.TrimSpace(want), err)
		}
	}

	// What the registry serves under that digest is the image the release built, of this commit.
	ref, err := name.NewDigest(pinned)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("the registry does not serve %s: %v", pinned, err)
	}
	if d, err := img.Digest(); err != nil || d.String() != ref.DigestStr() {
		t.Fatalf("served digest %v %v, want %s", d, err, ref.DigestStr())
	}
	bin := filepath.Join(t.TempDir(), "af")
	if err := extract(img, "af", bin); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	var v struct{ Version, Commit string }
	if err != nil || json.Unmarshal(out, &v) != nil || v.Version != version.Release || v.Commit != source {
		t.Errorf("the pushed image's af version: %v %s, want %s built from %s", err, out, version.Release, source)
	}

	// Made once: the same version again is refused; so is a tree with changes.
	if _, errOut, err := release(version.Release); err == nil || !strings.Contains(errOut, "exists already") {
		t.Errorf("a second release of %s: %v\n%s", version.Release, err, errOut)
	}
	git(t, clone, "tag", "-d", version.Release)
	if err := os.WriteFile(filepath.Join(clone, "README.md"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := release(version.Release); err == nil || !strings.Contains(errOut, "the tree has changes") {
		t.Errorf("a release of a changed tree: %v\n%s", err, errOut)
	}
}

// extract writes the file at path (no leading slash) of img's filesystem to out, executable.
func extract(img v1.Image, path, out string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return fmt.Errorf("the image has no %s", path)
		}
		if err != nil {
			return err
		}
		if strings.TrimPrefix(h.Name, "/") != path {
			continue
		}
		f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, tr); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, b)
	}
	return strings.TrimSpace(string(b))
}
