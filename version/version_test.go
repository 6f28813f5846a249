package version

import (
	"os"
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
// is the one action.yml runs: the three places agree.
func TestReleasedNamesAgree(t *testing.T) {
	release, err := os.ReadFile("../.github/workflows/release.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(release), `push dist/engine-oci "`+EngineRepository+`:$digest"`) {
		t.Errorf("release.yml does not push the engine image as %s:<source digest>", EngineRepository)
	}
	if !strings.Contains(string(release), `push dist/action-oci "`+strings.TrimSuffix(ActionImage, ":"+Release)+`:$GITHUB_REF_NAME"`) {
		t.Errorf("release.yml does not push the action's image as %s", ActionImage)
	}
	if !strings.Contains(string(release), `s/^const EngineDigest = "\(.*\)"$/\1/p' version/engine_gen.go`) {
		t.Error("release.yml does not tag the engine image with version.EngineDigest")
	}
	action, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(action), "image: docker://"+ActionImage+"\n") {
		t.Errorf("action.yml does not run %s", ActionImage)
	}
}
