package webhook

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/github/delivery"
)

func TestHeaders(t *testing.T) {
	body := []byte(`{"a":1}`)
	now := time.Unix(1700000000, 0)
	// An independent vector: HMAC-SHA256("key", "The quick brown fox jumps over the lazy dog").
	if got := mac([]byte("key"), []byte("The quick brown fox jumps over the lazy dog")); got != "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8" {
		t.Fatalf("HMAC-SHA256 %s", got)
	}
	cases := []struct {
		d    signed
		name string
		want string
	}{
		{signed{provider: providerGitHub, secret: []byte("key"), event: "push", body: body}, delivery.SignatureHeader, delivery.Sign([]byte("key"), body)},
		{signed{provider: providerStripe, secret: []byte("key"), body: body, now: now}, "Stripe-Signature", "t=1700000000,v1=" + mac([]byte("key"), []byte("1700000000."+string(body)))},
		{signed{provider: providerHMAC, secret: []byte("key"), body: body, header: "X-Sig"}, "X-Sig", mac([]byte("key"), body)},
	}
	for _, c := range cases {
		h, err := headers(c.d)
		if err != nil || h.Get(c.name) != c.want {
			t.Errorf("%s: %v %q, want %q", c.d.provider, err, h.Get(c.name), c.want)
		}
	}
	if _, err := headers(signed{provider: providerGitHub, body: body}); err == nil {
		t.Error("an empty secret was accepted")
	}
	if _, err := headers(signed{provider: "paypal", secret: []byte("k")}); err == nil || !strings.Contains(err.Error(), "github, stripe, hmac") {
		t.Errorf("unknown provider: %v", err)
	}
}

func TestExamplesAreJSON(t *testing.T) {
	for _, p := range providers {
		if len(events(p)) == 0 {
			t.Errorf("%s has no examples", p)
		}
		for _, e := range events(p) {
			b, _ := example(p, e)
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Errorf("%s %s: %v", p, e, err)
			}
			if p == providerStripe && m["type"] != e {
				t.Errorf("stripe %s: type %v", e, m["type"])
			}
		}
	}
}
