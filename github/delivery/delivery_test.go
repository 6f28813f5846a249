package delivery

import (
	"encoding/json"
	"regexp"
	"testing"
)

func TestSignAndVerify(t *testing.T) {
	// HMAC-SHA256("key", "The quick brown fox jumps over the lazy dog"), an independent vector.
	const fox = "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
	body := []byte("The quick brown fox jumps over the lazy dog")
	if got := Sign([]byte("key"), body); got != fox {
		t.Fatalf("Sign = %s, want %s", got, fox)
	}
	cases := []struct {
		name   string
		secret string
		body   string
		header string
		want   bool
	}{
		{"good", "key", string(body), fox, true},
		{"other body", "key", string(body) + ".", fox, false},
		{"other secret", "kez", string(body), fox, false},
		{"empty secret", "", string(body), Sign(nil, body), false},
		{"sha1 prefix", "key", string(body), "sha1=" + fox[len("sha256="):], false},
		{"no prefix", "key", string(body), fox[len("sha256="):], false},
		{"not hex", "key", string(body), "sha256=zz", false},
		{"short", "key", string(body), fox[:len(fox)-2], false},
		{"upper-case hex", "key", string(body), "sha256=F7BC83F430538424B13298E6AA6FB143EF4D59A14946175997479DBC2D1A3CD8", true},
	}
	for _, c := range cases {
		if got := Verify([]byte(c.secret), []byte(c.body), c.header); got != c.want {
			t.Errorf("%s: Verify = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestHeaders(t *testing.T) {
	body := []byte(`{"a":1}`)
	h, err := Headers([]byte("key"), "push", body)
	if err != nil {
		t.Fatal(err)
	}
	if !Verify([]byte("key"), body, h.Get(SignatureHeader)) || h.Get("X-GitHub-Event") != "push" || h.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", h)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(h.Get("X-GitHub-Delivery")) {
		t.Errorf("delivery id %q", h.Get("X-GitHub-Delivery"))
	}
	if h2, _ := Headers([]byte("key"), "push", body); h2.Get("X-GitHub-Delivery") == h.Get("X-GitHub-Delivery") {
		t.Error("two deliveries got one id")
	}
	if _, err := Headers(nil, "push", body); err == nil {
		t.Error("an empty secret was accepted")
	}
}

func TestExamplesAreJSON(t *testing.T) {
	if len(Events()) == 0 {
		t.Fatal("no examples")
	}
	for _, e := range Events() {
		b, _ := Example(e)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Errorf("%s: %v", e, err)
		}
	}
	if _, ok := Example("no-such-event"); ok {
		t.Error("an unknown event has an example")
	}
}
