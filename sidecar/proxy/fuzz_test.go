package proxy

import (
	"bufio"
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/antifailure/af/manifest"
	"github.com/antifailure/af/sidecar/decisionlog"
	"github.com/antifailure/af/sidecar/guard"
	"github.com/antifailure/af/sidecar/inbox"
	"github.com/antifailure/af/sidecar/policy"
)

// FuzzRequest parses arbitrary bytes as a request to the proxy ports and runs both handlers
// with a policy that blocks or captures everything (nothing is dialled). Neither may panic,
// and every request gets an answer and a decision.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{
		"GET http://api.test/x HTTP/1.1\r\nHost: api.test\r\n\r\n",
		"CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n",
		"POST http://hooks.capture.test/h HTTP/1.1\r\nHost: hooks.capture.test\r\nContent-Length: 5\r\n\r\nhello",
		"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n",
		"GET ftp://x/ HTTP/1.1\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	pol, err := policy.New(manifest.Egress{Default: "block", Rules: []manifest.EgressRule{{Host: "*.capture.test", Mode: "capture"}}})
	if err != nil {
		f.Fatal(err)
	}
	log := decisionlog.New("fuzz", 16, nil)
	p := New(Options{Policy: pol, Guard: guard.New(guard.Options{}), Log: log, Inbox: inbox.NewStore(8, 64)})
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			return
		}
		for _, h := range []http.Handler{p.Explicit(), p.Transparent()} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code == 0 {
				t.Fatal("no status")
			}
			if rec.Code == http.StatusOK && rec.Header().Get("X-Af-Egress") != "capture" {
				t.Fatalf("a request was let through: %d %v", rec.Code, rec.Header())
			}
		}
	})
}
