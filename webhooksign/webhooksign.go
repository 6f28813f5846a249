// Package webhooksign signs a webhook delivery the way a provider does, so `af webhook
// trigger` can exercise a preview's webhook handler: GitHub (X-Hub-Signature-256 over the body,
// with X-GitHub-Event and X-GitHub-Delivery), Stripe (Stripe-Signature: t=…,v1=… over
// "t.payload"), and a plain HMAC-SHA256 in a named header. It also holds small example payloads
// for common events of each.
package webhooksign

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Providers af signs for.
const (
	GitHub = "github"
	Stripe = "stripe"
	HMAC   = "hmac"
)

// Providers lists them, for messages.
var Providers = []string{GitHub, Stripe, HMAC}

// Delivery is what to sign.
type Delivery struct {
	Provider string
	Secret   []byte
	Event    string
	Body     []byte
	// Header is the header an hmac delivery's signature goes in (default X-Signature).
	Header string
	Now    time.Time
}

// Headers returns the headers the provider would send with d.Body.
func Headers(d Delivery) (http.Header, error) {
	if len(d.Secret) == 0 {
		return nil, fmt.Errorf("no secret: a signature made with an empty key proves nothing")
	}
	if d.Now.IsZero() {
		d.Now = time.Now()
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	switch d.Provider {
	case GitHub:
		h.Set("User-Agent", "GitHub-Hookshot/af")
		h.Set("X-GitHub-Event", d.Event)
		h.Set("X-GitHub-Delivery", uuid())
		h.Set("X-Hub-Signature-256", "sha256="+mac(d.Secret, d.Body))
	case Stripe:
		t := strconv.FormatInt(d.Now.Unix(), 10)
		h.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
		h.Set("Stripe-Signature", "t="+t+",v1="+mac(d.Secret, []byte(t+"."+string(d.Body))))
	case HMAC:
		name := d.Header
		if name == "" {
			name = "X-Signature"
		}
		h.Set(name, mac(d.Secret, d.Body))
	default:
		return nil, fmt.Errorf("provider %q: one of %s", d.Provider, strings.Join(Providers, ", "))
	}
	return h, nil
}

func mac(secret, msg []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(msg)
	return hex.EncodeToString(m.Sum(nil))
}

func uuid() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b[:])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

// Example returns af's example payload for a provider's event, and false when it has none.
func Example(provider, event string) ([]byte, bool) {
	p, ok := examples[provider][event]
	if !ok {
		return nil, false
	}
	return []byte(p), true
}

// Events lists the events a provider has examples for.
func Events(provider string) []string {
	var out []string
	for e := range examples[provider] {
		out = append(out, e)
	}
	sort.Strings(out)
	return out
}

var examples = map[string]map[string]string{
	GitHub: {
		"ping": `{"zen":"Keep it logically awesome.","hook_id":1,"hook":{"type":"Repository","id":1,"active":true,"events":["push","pull_request"]}}`,
		"push": `{"ref":"refs/heads/main","before":"0000000000000000000000000000000000000000","after":"6113728f27ae82c7b1a177c8d03f9e96e0adf246",` +
			`"repository":{"id":1,"name":"shop","full_name":"acme/shop","private":true},"pusher":{"name":"octo","email":"octo@users.noreply.github.test"},` +
			`"commits":[{"id":"6113728f27ae82c7b1a177c8d03f9e96e0adf246","message":"Ship it","author":{"name":"Octo","email":"octo@users.noreply.github.test"}}]}`,
		"pull_request": `{"action":"opened","number":7,"pull_request":{"number":7,"state":"open","title":"Add checkout","merged":false,` +
			`"head":{"ref":"checkout","sha":"6113728f27ae82c7b1a177c8d03f9e96e0adf246"},"base":{"ref":"main","sha":"0000000000000000000000000000000000000000"}},` +
			`"repository":{"id":1,"name":"shop","full_name":"acme/shop","private":true},"sender":{"login":"octo","id":1,"type":"User"}}`,
	},
	Stripe: {
		"payment_intent.succeeded": `{"id":"evt_af_example","object":"event","api_version":"2024-06-20","type":"payment_intent.succeeded","livemode":false,` +
			`"data":{"object":{"id":"pi_af_example","object":"payment_intent","amount":2000,"currency":"usd","status":"succeeded"}}}`,
		"checkout.session.completed": `{"id":"evt_af_example","object":"event","api_version":"2024-06-20","type":"checkout.session.completed","livemode":false,` +
			`"data":{"object":{"id":"cs_af_example","object":"checkout.session","amount_total":2000,"currency":"usd","payment_status":"paid","status":"complete"}}}`,
		"customer.subscription.created": `{"id":"evt_af_example","object":"event","api_version":"2024-06-20","type":"customer.subscription.created","livemode":false,` +
			`"data":{"object":{"id":"sub_af_example","object":"subscription","status":"active","customer":"cus_af_example"}}}`,
	},
	HMAC: {
		"example": `{"event":"example","id":"af-example","data":{"message":"hello from af webhook trigger"}}`,
	},
}
