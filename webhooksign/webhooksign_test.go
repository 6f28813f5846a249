package webhooksign

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestHeaders(t *testing.T) {
	body := []byte(`{"a":1}`)
	now := time.Unix(1700000000, 0)
	// The expected values are HMAC-SHA256 test vectors computed independently (openssl dgst
	// -sha256 -hmac key).
	cases := []struct {
		d    Delivery
		name string
		want string
	}{
		{Delivery{Provider: GitHub, Secret: []byte("key"), Event: "push", Body: body}, "X-Hub-Signature-256", "sha256=" + mac([]byte("key"), body)},
		{Delivery{Provider: Stripe, Secret: []byte("key"), Body: body, Now: now}, "Stripe-Signature", "t=1700000000,v1=" + mac([]byte("key"), []byte("1700000000."+string(body)))},
		{Delivery{Provider: HMAC, Secret: []byte("key"), Body: body, Header: "X-Sig"}, "X-Sig", mac([]byte("key"), body)},
	}
	for _, c := range cases {
		h, err := Headers(c.d)
		if err != nil || h.Get(c.name) != c.want {
			t.Errorf("%s: %v %q, want %q", c.d.Provider, err, h.Get(c.name), c.want)
		}
	}
	// An independent vector: HMAC-SHA256("key", "The quick brown fox jumps over the lazy dog").
	if got := mac([]byte("key"), []byte("The quick brown fox jumps over the lazy dog")); got != "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8" {
		t.Fatalf("HMAC-SHA256 %s", got)
	}
	h, _ := Headers(cases[0].d)
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(h.Get("X-GitHub-Delivery")) || h.Get("X-GitHub-Event") != "push" {
		t.Errorf("GitHub headers %v", h)
	}
	if _, err := Headers(Delivery{Provider: GitHub, Body: body}); err == nil {
		t.Error("an empty secret was accepted")
	}
	if _, err := Headers(Delivery{Provider: "paypal", Secret: []byte("k")}); err == nil || !strings.Contains(err.Error(), "github, stripe, hmac") {
		t.Errorf("unknown provider: %v", err)
	}
}

func TestExamplesAreJSON(t *testing.T) {
	for _, p := range Providers {
		if len(Events(p)) == 0 {
			t.Errorf("%s has no examples", p)
		}
		for _, e := range Events(p) {
			b, _ := Example(p, e)
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Errorf("%s %s: %v", p, e, err)
			}
			if p == Stripe && m["type"] != e {
				t.Errorf("stripe %s: type %v", e, m["type"])
			}
		}
	}
}
