package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/cmd/af/internal/cmdtest"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/github/delivery"
	"github.com/antifailure/af/runtime/runtimetest"
)

const secret = "whsec_af_test"

// handler verifies deliveries as the providers' own receivers do: GitHub's X-Hub-Signature-256
// with the af App's verifier, Stripe's t=,v1= over "t.payload" within five minutes, a plain
// hex HMAC in X-Signature.
func handler(t *testing.T) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hooks/github", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !delivery.Verify([]byte(secret), b, r.Header.Get("X-Hub-Signature-256")) || r.Header.Get("X-GitHub-Event") != "push" || r.Header.Get("X-GitHub-Delivery") == "" {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		w.Header().Set("X-Handled-By", "shop")
		io.WriteString(w, "thanks for the push\n")
	})
	mux.HandleFunc("POST /hooks/stripe", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var ts, v1 string
		for _, part := range strings.Split(r.Header.Get("Stripe-Signature"), ",") {
			k, v, _ := strings.Cut(part, "=")
			switch k {
			case "t":
				ts = v
			case "v1":
				v1 = v
			}
		}
		n, err := strconv.ParseInt(ts, 10, 64)
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(ts + "." + string(b)))
		want := hex.EncodeToString(m.Sum(nil))
		if err != nil || time.Since(time.Unix(n, 0)) > 5*time.Minute || !hmac.Equal([]byte(v1), []byte(want)) || !strings.Contains(string(b), `"type":"payment_intent.succeeded"`) {
			http.Error(w, "bad stripe signature", http.StatusBadRequest)
			return
		}
		io.WriteString(w, `{"received":true}`)
	})
	mux.HandleFunc("POST /hooks/hmac", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		m := hmac.New(sha256.New, []byte(secret))
		m.Write(b)
		if r.Header.Get("X-Sig") != hex.EncodeToString(m.Sum(nil)) {
			http.Error(w, "bad hmac", http.StatusForbidden)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

func TestTrigger(t *testing.T) {
	srv := httptest.NewServer(handler(t))
	defer srv.Close()
	o := runtimetest.NewObserved()
	o.Services = map[string]string{"web": strings.TrimPrefix(srv.URL, "http://")}
	env := cmdtest.Env{Runtime: o, Vars: map[string]string{"HOOK_SECRET": secret, "WRONG": "not-it"}}

	r := cmdtest.Exec(t, env, NewCmdWebhook, "trigger", "--env", "e", "--to", "web/hooks/github", "--provider", "github", "--secret-env", "HOOK_SECRET", "--event", "push")
	if r.Err != nil || !strings.Contains(r.Out, "200 OK") || !strings.Contains(r.Out, "X-Handled-By: shop") || !strings.Contains(r.Out, "thanks for the push") {
		t.Fatalf("github: %v\n%s", r.Err, r.Out)
	}
	if strings.Contains(r.Out+r.ErrOut, secret) {
		t.Fatal("the secret was printed")
	}
	r = cmdtest.Exec(t, env, NewCmdWebhook, "trigger", "--env", "e", "--to", "web/hooks/stripe", "--provider", "stripe", "--secret-env", "HOOK_SECRET", "--event", "payment_intent.succeeded")
	if r.Err != nil || !strings.Contains(r.Out, `{"received":true}`) {
		t.Fatalf("stripe: %v\n%s", r.Err, r.Out)
	}
	r = cmdtest.Exec(t, env, NewCmdWebhook, "trigger", "--env", "e", "--to", "web/hooks/hmac", "--provider", "hmac", "--header", "X-Sig", "--secret-env", "HOOK_SECRET")
	if r.Err != nil || !strings.Contains(r.Out, "204 No Content") {
		t.Fatalf("hmac: %v\n%s", r.Err, r.Out)
	}
	// The wrong secret: the service refuses, af prints its answer and exits with AF-RUN-055.
	r = cmdtest.Exec(t, env, NewCmdWebhook, "trigger", "--env", "e", "--to", "web/hooks/github", "--provider", "github", "--secret-env", "WRONG", "--event", "push")
	if e := failure.As(r.Err); e == nil || e.Entry != failure.WebhookRefused || !strings.Contains(r.Out, "bad signature") {
		t.Fatalf("wrong secret: %v\n%s", r.Err, r.Out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--to", "web/hooks/github", "--secret-env", "UNSET", "--event", "push"}, "UNSET (--secret-env) is not set"},
		{[]string{"--to", "web/hooks/github", "--secret-env", "HOOK_SECRET"}, "--event is required"},
		{[]string{"--to", "web/hooks/github", "--secret-env", "HOOK_SECRET", "--event", "gollum"}, "no example payload"},
		{[]string{"--to", "web:99999/x", "--secret-env", "HOOK_SECRET", "--event", "push"}, "the port is not"},
		{[]string{"--to", "web/x", "--provider", "paypal", "--secret-env", "HOOK_SECRET", "--event", "push"}, "no example payload"},
		{[]string{"--secret-env", "HOOK_SECRET", "--event", "push"}, "--to"},
	} {
		r := cmdtest.Exec(t, env, NewCmdWebhook, append([]string{"trigger", "--env", "e"}, c.args...)...)
		if e := failure.As(r.Err); e == nil || e.Entry != failure.UsageInvalid || !strings.Contains(r.Err.Error(), c.want) {
			t.Errorf("%v: %v, want AF-RUN-003 saying %q", c.args, r.Err, c.want)
		}
	}
}
