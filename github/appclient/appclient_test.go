package appclient_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/github/appclient"
	"github.com/antifailure/af/github/githubtest"
)

// The App's credentials as GitHub issues them (PKCS#1) and as converted (PKCS#8) are taken;
// anything else is AF-GH-007 saying what it is.
func TestNewRefusesWhatIsNoAppKey(t *testing.T) {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(rk)
	ec8, _ := x509.MarshalPKCS8PrivateKey(ek)
	enc := func(typ string, b []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}) }
	for _, c := range []struct {
		name string
		o    appclient.Options
		says string // "" for accepted
	}{
		{"PKCS#1", appclient.Options{AppID: 1, PrivateKey: enc("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rk))}, ""},
		{"PKCS#8", appclient.Options{AppID: 1, PrivateKey: enc("PRIVATE KEY", pkcs8)}, ""},
		{"a token", appclient.Options{Token: "ghs_x"}, ""},
		{"not PEM", appclient.Options{AppID: 1, PrivateKey: []byte("ghp_notakey")}, "not PEM"},
		{"an EC key", appclient.Options{AppID: 1, PrivateKey: enc("PRIVATE KEY", ec8)}, "not RSA"},
		{"an id without a key", appclient.Options{AppID: 1}, "one is missing"},
		{"nothing", appclient.Options{}, "no GitHub credentials"},
	} {
		g, err := appclient.New(c.o)
		switch {
		case c.says == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.says == "" && g.IsApp() != (c.o.AppID > 0):
			t.Errorf("%s: IsApp %v", c.name, g.IsApp())
		case c.says != "" && (failure.CodeOf(err) != failure.AppConfigInvalid.Code || !strings.Contains(err.Error(), c.says)):
			t.Errorf("%s: %v, want %s saying %q", c.name, err, failure.AppConfigInvalid.Code, c.says)
		}
	}
}

// With one repository's token (af reap without the App) the clients read that repository and
// write as github-actions[bot]; a GitHub refusal reads as its status.
func TestTokenClients(t *testing.T) {
	const tok = "ghs_reaptoken0123456789"
	s := githubtest.New(t, tok)
	g, err := appclient.New(appclient.Options{APIURL: s.URL, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s.SetPull(4, "open", strings.Repeat("a", 40), false)
	s.SetPull(5, "closed", strings.Repeat("b", 40), true)
	open, err := g.OpenPulls(ctx, "acme/shop")
	if err != nil || !open[4] || open[5] {
		t.Errorf("OpenPulls = %v, %v", open, err)
	}
	if m, err := g.Merged(ctx, "acme/shop", 5); err != nil || !m {
		t.Errorf("Merged(5) = %v, %v", m, err)
	}
	rep, err := g.Reporter(ctx, "acme/shop", 0)
	if err != nil || rep.Bot != "github-actions[bot]" {
		t.Fatalf("Reporter: %+v, %v", rep, err)
	}
	_, err = g.Merged(ctx, "acme/shop", 404)
	if !appclient.Gone(err) || appclient.Status(err) != 404 {
		t.Errorf("a pull request that is not there: %v (status %d)", err, appclient.Status(err))
	}
	if appclient.Status(context.Canceled) != 0 || appclient.Gone(nil) {
		t.Errorf("not GitHub's answers: %d %v", appclient.Status(context.Canceled), appclient.Gone(nil))
	}
}
