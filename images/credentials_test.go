package images

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
)

func TestLoopbackRegistry(t *testing.T) {
	for prefix, want := range map[string]bool{
		"127.0.0.1:5000/af": true, "localhost:5000": true, "[::1]:5000/x": true, "localhost/x": true,
		"ghcr.io/acme/previews": false, "registry.internal:5000/x": false, "10.0.0.5:5000/x": false,
	} {
		if got := LoopbackRegistry(prefix); got != want {
			t.Errorf("LoopbackRegistry(%q) = %v, want %v", prefix, got, want)
		}
	}
}

// TestPinAsksOnlyItsRegistry: references of another registry, digests and no prefix are left
// as written without asking anyone (no network here).
func TestPinAsksOnlyItsRegistry(t *testing.T) {
	for _, c := range []struct{ prefix, ref string }{
		{"", "ghcr.io/acme/web:1"},
		{"ghcr.io/acme", "docker.io/library/busybox:1"},
		{"ghcr.io/acme", "ghcr.io/acme/web@sha256:0123456789012345678901234567890123456789012345678901234567890123"},
		{"ghcr.io/acme", "not a reference"},
	} {
		got, ok, err := Pin(context.Background(), c.prefix, nil, c.ref)
		if got != c.ref || ok || err != nil {
			t.Errorf("Pin(%q, %q) = %q %v %v, want it as written", c.prefix, c.ref, got, ok, err)
		}
	}
}

func TestPullSecret(t *testing.T) {
	host, data, err := PullSecret("ghcr.io/acme/previews", &authn.Basic{Username: "bot", Password: "s3cret"})
	if err != nil || host != "ghcr.io" {
		t.Fatal(host, err)
	}
	var cfg struct {
		Auths map[string]map[string]string `json:"auths"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	if e := cfg.Auths["ghcr.io"]; e["username"] != "bot" || e["password"] != "s3cret" || e["auth"] != "Ym90OnMzY3JldA==" {
		t.Errorf("docker config %s", data)
	}
	if _, data, err := PullSecret("ghcr.io/acme", authn.Anonymous); data != nil || err != nil {
		t.Errorf("anonymous credentials made a secret: %s %v", data, err)
	}
}
