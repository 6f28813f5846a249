// Package delivery is a GitHub webhook delivery as GitHub sends one: the body's signature with
// the webhook's secret (X-Hub-Signature-256, "sha256=" and the HMAC-SHA256 in hex), checked in
// constant time, the headers that go with it, and small example payloads of common events. The
// App verifies deliveries with it; `af webhook trigger --provider github`, the conformance suite
// and the test tools sign or verify as GitHub with it. It is the one implementation of
// GitHub's signature in af.
package delivery

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// SignatureHeader is the header GitHub puts the signature in. The SHA-1 one (X-Hub-Signature)
// is never written nor accepted.
const SignatureHeader = "X-Hub-Signature-256"

// Sign returns the X-Hub-Signature-256 value GitHub sends for body.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify says whether header is body's SHA-256 signature under secret, comparing in constant
// time. An empty secret verifies nothing.
func Verify(secret, body []byte, header string) bool {
	if len(secret) == 0 {
		return false
	}
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hmac.Equal(got, m.Sum(nil))
}

// Headers returns the headers GitHub sends with a delivery of event whose payload is body:
// its content type, user agent, event, a fresh delivery id and the signature.
func Headers(secret []byte, event string, body []byte) (http.Header, error) {
	if len(secret) == 0 {
		return nil, errors.New("no secret: a signature made with an empty key proves nothing")
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitHub-Hookshot/af")
	h.Set("X-GitHub-Event", event)
	h.Set("X-GitHub-Delivery", NewID())
	h.Set(SignatureHeader, Sign(secret, body))
	return h, nil
}

// NewID returns a random delivery id in GitHub's form (a version 4 UUID).
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b[:])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

// Example returns af's example payload for event, and false when it has none.
func Example(event string) ([]byte, bool) {
	p, ok := examples[event]
	return []byte(p), ok
}

// Events lists the events Example has payloads for, sorted.
func Events() []string { return slices.Sorted(maps.Keys(examples)) }

var examples = map[string]string{
	"ping": `{"zen":"Keep it logically awesome.","hook_id":1,"hook":{"type":"Repository","id":1,"active":true,"events":["push","pull_request"]}}`,
	"push": `{"ref":"refs/heads/main","before":"0000000000000000000000000000000000000000","after":"6113728f27ae82c7b1a177c8d03f9e96e0adf246",` +
		`"repository":{"id":1,"name":"shop","full_name":"acme/shop","private":true},"pusher":{"name":"octo","email":"octo@users.noreply.github.test"},` +
		`"commits":[{"id":"6113728f27ae82c7b1a177c8d03f9e96e0adf246","message":"Ship it","author":{"name":"Octo","email":"octo@users.noreply.github.test"}}]}`,
	"pull_request": `{"action":"opened","number":7,"pull_request":{"number":7,"state":"open","title":"Add checkout","merged":false,` +
		`"head":{"ref":"checkout","sha":"6113728f27ae82c7b1a177c8d03f9e96e0adf246"},"base":{"ref":"main","sha":"0000000000000000000000000000000000000000"}},` +
		`"repository":{"id":1,"name":"shop","full_name":"acme/shop","private":true},"sender":{"login":"octo","id":1,"type":"User"}}`,
}
