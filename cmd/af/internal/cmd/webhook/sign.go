package webhook

// How each provider signs a delivery: GitHub's signature is github/delivery's (the one the App
// verifies); Stripe (Stripe-Signature: t=…,v1=… over "t.payload") and a plain HMAC-SHA256 in a
// named header are the trigger's own, as are their example payloads.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/antifailure/af/github/delivery"
)

// Providers af signs for.
const (
	providerGitHub = "github"
	providerStripe = "stripe"
	providerHMAC   = "hmac"
)

var providers = []string{providerGitHub, providerStripe, providerHMAC}

// signed is what to sign.
type signed struct {
	provider string
	secret   []byte
	event    string
	body     []byte
	// header is the header an hmac delivery's signature goes in (default X-Signature).
	header string
	now    time.Time
}

// headers returns the headers the provider would send with d.body.
func headers(d signed) (http.Header, error) {
	if len(d.secret) == 0 {
		return nil, fmt.Errorf("no secret: a signature made with an empty key proves nothing")
	}
	if d.now.IsZero() {
		d.now = time.Now()
	}
	switch d.provider {
	case providerGitHub:
		return delivery.Headers(d.secret, d.event, d.body)
	case providerStripe:
		t := strconv.FormatInt(d.now.Unix(), 10)
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
		h.Set("Stripe-Signature", "t="+t+",v1="+mac(d.secret, []byte(t+"."+string(d.body))))
		return h, nil
	case providerHMAC:
		name := d.header
		if name == "" {
			name = "X-Signature"
		}
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set(name, mac(d.secret, d.body))
		return h, nil
	}
	return nil, fmt.Errorf("provider %q: one of %s", d.provider, strings.Join(providers, ", "))
}

func mac(secret, msg []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(msg)
	return hex.EncodeToString(m.Sum(nil))
}

// example returns af's example payload for a provider's event, and false when it has none.
func example(provider, event string) ([]byte, bool) {
	if provider == providerGitHub {
		return delivery.Example(event)
	}
	p, ok := examples[provider][event]
	return []byte(p), ok
}

// events lists the events a provider has examples for.
func events(provider string) []string {
	if provider == providerGitHub {
		return delivery.Events()
	}
	return slices.Sorted(maps.Keys(examples[provider]))
}

var examples = map[string]map[string]string{
	providerStripe: {
		"payment_intent.succeeded": `{"id":"evt_af_example","object":"event","api_version":"2024-06-20","type":"payment_intent.succeeded","livemode":false,` +
			`"data":{"object":{"id":"pi_af_example","object":"payment_intent","amount":2000,"currency":"usd","status":"succeeded"}}}`,
		"checkout.session.completed": `{"id":"evt_af_example","object":"event","api_version":"2024-06-20","type":"checkout.session.completed","livemode":false,` +
			`"data":{"object":{"id":"cs_af_example","object":"checkout.session","amount_total":2000,"currency":"usd","payment_status":"paid","status":"complete"}}}`,
		"customer.subscription.created": `{"id":"evt_af_example","object":"event","api_version":"2024-06-20","type":"customer.subscription.created","livemode":false,` +
			`"data":{"object":{"id":"sub_af_example","object":"subscription","status":"active","customer":"cus_af_example"}}}`,
	},
	providerHMAC: {
		"example": `{"event":"example","id":"af-example","data":{"message":"hello from af webhook trigger"}}`,
	},
}
