package version

import "testing"

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
	if LocalEngineImage != "antifailure/af-engine:"+EngineDigest {
		t.Errorf("LocalEngineImage = %q", LocalEngineImage)
	}
}
