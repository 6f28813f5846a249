package version

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestEngineImageFrom(t *testing.T) {
	for _, c := range []struct {
		env         map[string]string
		image, from string
	}{
		{map[string]string{}, "", ""},
		{map[string]string{"AF_PROXY_IMAGE": "r/old:1"}, "r/old:1", "AF_PROXY_IMAGE"},
		{map[string]string{"AF_ENGINE_IMAGE": "r/new:1"}, "r/new:1", "AF_ENGINE_IMAGE"},
		{map[string]string{"AF_ENGINE_IMAGE": "r/new:1", "AF_PROXY_IMAGE": "r/old:1"}, "r/new:1", "AF_ENGINE_IMAGE"},
	} {
		img, from := EngineImageFrom(func(k string) string { return c.env[k] })
		if img != c.image || from != c.from {
			t.Errorf("%v: %q from %q", c.env, img, from)
		}
		want := c.image
		if want == "" {
			want = LocalEngineImage
		}
		if got := Get(func(k string) string { return c.env[k] }).EngineImage; got != want {
			t.Errorf("%v: Get().EngineImage = %q, want %q", c.env, got, want)
		}
	}
	if LocalEngineImage != "ghcr.io/antifailure/af-engine:"+EngineDigest {
		t.Errorf("LocalEngineImage = %q", LocalEngineImage)
	}
}

// The engine image af deploys by default is the one release.yml pushes, and the action's image
// is the one hack/release.sh pushes and action.yml runs: the places agree.
func TestReleasedNamesAgree(t *testing.T) {
	release, err := os.ReadFile("../.github/workflows/release.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(release), `push dist/engine-oci "`+EngineRepository+`:$digest"`) {
		t.Errorf("release.yml does not push the engine image as %s:<source digest>", EngineRepository)
	}
	if !strings.Contains(string(release), `s/^const EngineDigest = "\(.*\)"$/\1/p' version/engine_gen.go`) {
		t.Error("release.yml does not tag the engine image with version.EngineDigest")
	}
	if !strings.Contains(string(release), `hack/release.sh "$VERSION"`) {
		t.Error("release.yml does not run hack/release.sh, which pushes the action's image and pins it")
	}
	script, err := os.ReadFile("../hack/release.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "${AF_RELEASE_REPOSITORY:-"+ActionRepository+"}") || ActionImage != ActionRepository+":"+Release {
		t.Errorf("hack/release.sh does not push to %s, or ActionImage (%s) is not its tag of the release", ActionRepository, ActionImage)
	}
	action, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(action), "image: docker://"+ActionImage+"\n") &&
		!regexp.MustCompile(`image: docker://`+regexp.QuoteMeta(ActionRepository)+`@sha256:[0-9a-f]{64} # `+regexp.QuoteMeta(Release)+`\n`).Match(action) {
		t.Errorf("action.yml runs neither %s nor its release's pin by digest", ActionImage)
	}
}

func TestPinnedActionImage(t *testing.T) {
	for ref, want := range map[string]bool{
		ActionRepository + "@sha256:" + strings.Repeat("a1", 32): true,
		ActionImage: false,
		ActionRepository + "@sha256:" + strings.Repeat("a1", 31):             false,
		ActionRepository + "@sha256:" + strings.Repeat("A1", 32):             false,
		"ghcr.io/someone/af@sha256:" + strings.Repeat("a1", 32):              false,
		ActionRepository + "@sha256:" + strings.Repeat("a1", 32) + ":latest": false,
	} {
		if got := PinnedActionImage(ref); got != want {
			t.Errorf("PinnedActionImage(%q) = %v, want %v", ref, got, want)
		}
	}
}
