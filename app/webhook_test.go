package app

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/github/delivery"
	"github.com/antifailure/af/github/githubtest"
)

type recorder struct {
	mu        sync.Mutex
	got       []Teardown
	cancelled []string
	err       error
}

func (q *recorder) Cancel(repository string, pullRequest int) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.cancelled = append(q.cancelled, fmt.Sprintf("%s#%d", repository, pullRequest))
	return q.err
}

func (q *recorder) Enqueue(t Teardown) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return q.err
	}
	q.got = append(q.got, t)
	return nil
}

func (q *recorder) queued() []Teardown {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]Teardown(nil), q.got...)
}

var secret = []byte("It's a Secret to Everybody ✓")

func deliver(h http.Handler, event, id, contentType string, body []byte, headers map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	r.Header.Set("X-GitHub-Event", event)
	r.Header.Set("X-GitHub-Delivery", id)
	for k, v := range headers {
		if v == "" {
			r.Header.Del(k)
			continue
		}
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestEmptySecretRefused(t *testing.T) {
	if _, err := NewWebhook(nil, &recorder{}, nil); !errors.Is(err, failure.AppConfigInvalid) {
		t.Fatalf("got %v, want AF-GH-007", err)
	}
}

// Only a valid X-Hub-Signature-256 gets anything done; a refused body is never logged.
func TestSignatures(t *testing.T) {
	closed := githubtest.PullRequestEvent(t, "closed", "acme/shop", 7, strings.Repeat("a", 40), false)
	good := delivery.Sign(secret, closed)
	cases := []struct {
		name    string
		headers map[string]string
		status  int
	}{
		{"valid SHA-256", map[string]string{"X-Hub-Signature-256": good}, http.StatusAccepted},
		{"SHA-1 only", map[string]string{"X-Hub-Signature": "sha1=" + strings.Repeat("0", 40)}, http.StatusUnauthorized},
		{"missing", nil, http.StatusUnauthorized},
		{"wrong", map[string]string{"X-Hub-Signature-256": delivery.Sign([]byte("another secret"), closed)}, http.StatusUnauthorized},
		{"malformed hex", map[string]string{"X-Hub-Signature-256": "sha256=zz" + good[9:]}, http.StatusUnauthorized},
		{"truncated", map[string]string{"X-Hub-Signature-256": good[:40]}, http.StatusUnauthorized},
		{"other algorithm", map[string]string{"X-Hub-Signature-256": "sha512=" + good[7:]}, http.StatusUnauthorized},
		{"upper-case hex", map[string]string{"X-Hub-Signature-256": "sha256=" + strings.ToUpper(good[7:])}, http.StatusAccepted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			q := &recorder{}
			h, err := NewWebhook(secret, q, slog.New(slog.NewJSONHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			w := deliver(h, "pull_request", "d-"+tc.name, "application/json", closed, tc.headers)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d", w.Code, tc.status)
			}
			if want := map[bool]int{true: 1, false: 0}[tc.status == http.StatusAccepted]; len(q.queued()) != want {
				t.Fatalf("%d queued, want %d", len(q.queued()), want)
			}
			if strings.Contains(logs.String(), "acme/shop") {
				t.Fatalf("the log holds the body: %s", logs.String())
			}
		})
	}
}

func TestBodies(t *testing.T) {
	closed := githubtest.PullRequestEvent(t, "closed", "acme/shop", 7, strings.Repeat("a", 40), false)
	wrongTypes := bytes.Replace(closed, []byte(`"number":7`), []byte(`"number":"seven"`), 1)
	huge := make([]byte, MaxBody+1)
	form := []byte("payload=" + url.QueryEscape(string(closed)))
	cases := []struct {
		name, event, contentType string
		body                     []byte
		status, queued           int
	}{
		{"JSON", "pull_request", "application/json", closed, http.StatusAccepted, 1},
		{"form-encoded payload=", "pull_request", "application/x-www-form-urlencoded", form, http.StatusAccepted, 1},
		{"over 25 MB", "pull_request", "application/json", huge, http.StatusBadRequest, 0},
		{"not JSON", "pull_request", "application/json", []byte("{not json"), http.StatusBadRequest, 0},
		{"wrong types", "pull_request", "application/json", wrongTypes, http.StatusBadRequest, 0},
		{"another content type", "pull_request", "text/plain", closed, http.StatusBadRequest, 0},
		// Every payload below is GitHub's own example, checked against @octokit/openapi-webhooks.
		{"ping", "ping", "application/json", event(t, "ping", ""), http.StatusAccepted, 0},
		{"installation", "installation", "application/json", event(t, "installation", "created"), http.StatusAccepted, 0},
		{"installation_repositories", "installation_repositories", "application/json", event(t, "installation_repositories", "added"), http.StatusAccepted, 0},
		{"synchronize is the action's", "pull_request", "application/json", githubtest.PullRequestEvent(t, "synchronize", "acme/shop", 7, strings.Repeat("b", 40), false), http.StatusNoContent, 0},
		{"reopened cancels the waiting teardown", "pull_request", "application/json", githubtest.PullRequestEvent(t, "reopened", "acme/shop", 7, strings.Repeat("b", 40), false), http.StatusAccepted, 0},
		{"another event", "issues", "application/json", event(t, "issues", "opened"), http.StatusNoContent, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := &recorder{}
			h, _ := NewWebhook(secret, q, nil)
			w := deliver(h, tc.event, "d-"+tc.name, tc.contentType, tc.body, map[string]string{"X-Hub-Signature-256": delivery.Sign(secret, tc.body)})
			if w.Code != tc.status || len(q.queued()) != tc.queued {
				t.Fatalf("status %d with %d queued, want %d with %d (%s)", w.Code, len(q.queued()), tc.status, tc.queued, w.Body.String())
			}
			if reopened := strings.HasPrefix(tc.name, "reopened"); reopened != (len(q.cancelled) == 1) || (reopened && q.cancelled[0] != "acme/shop#7") {
				t.Fatalf("cancelled %v", q.cancelled)
			}
		})
	}
}

// A redelivery (same X-GitHub-Delivery) is acknowledged and queues nothing twice; the
// teardown names the pull request, the merge and the installation.
func TestRedeliveryOnce(t *testing.T) {
	q := &recorder{}
	h, _ := NewWebhook(secret, q, nil)
	ev := githubtest.Event(t, "pull_request", "closed")
	ev["installation"] = map[string]any{"id": 42, "node_id": "MDIz"}
	body := githubtest.ValidateEvent(t, "pull_request", "closed", ev)
	for i := 0; i < 3; i++ {
		if w := deliver(h, "pull_request", "same-delivery", "application/json", body, map[string]string{"X-Hub-Signature-256": delivery.Sign(secret, body)}); w.Code != http.StatusAccepted {
			t.Fatalf("delivery %d: %d", i, w.Code)
		}
	}
	got := q.queued()
	if len(got) != 1 || got[0].InstallationID != 42 || got[0].Delivery != "same-delivery" || got[0].PullRequest < 1 {
		t.Fatalf("queued %+v", got)
	}
	// A queue that refuses leaves the delivery to GitHub's redelivery: it is not remembered.
	q2 := &recorder{err: errors.New("full")}
	h2, _ := NewWebhook(secret, q2, nil)
	if w := deliver(h2, "pull_request", "d", "application/json", body, map[string]string{"X-Hub-Signature-256": delivery.Sign(secret, body)}); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("refused queue: %d", w.Code)
	}
	q2.err = nil
	if w := deliver(h2, "pull_request", "d", "application/json", body, map[string]string{"X-Hub-Signature-256": delivery.Sign(secret, body)}); w.Code != http.StatusAccepted || len(q2.queued()) != 1 {
		t.Fatalf("the redelivery after a refusal: %d, %d queued", w.Code, len(q2.queued()))
	}
}

// GitHub's reference implementation (npm @octokit/webhooks-methods, run by Node) signs what the
// App accepts, and verifies what the App signs.
func TestSignaturesAgreeWithOctokit(t *testing.T) {
	mod, err := githubtest.NPMFile(githubtest.MethodsPackage, "package.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := mod[:strings.LastIndex(mod, "/")]
	body := string(githubtest.PullRequestEvent(t, "closed", "acme/shop", 7, strings.Repeat("a", 40), false)) + `{"note":"ünïcødé ✓"}`
	script := `import { sign, verify } from "` + dir + `/dist-node/index.js";
const [secret, body, ours] = [process.argv[1], process.argv[2], process.argv[3]];
const theirs = await sign(secret, body);
const ok = await verify(secret, body, ours);
console.log(theirs + " " + ok);`
	out, err := exec.Command("node", "--input-type=module", "-e", script, string(secret), body, delivery.Sign(secret, []byte(body))).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	theirs, ok, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if !delivery.Verify(secret, []byte(body), theirs) {
		t.Fatalf("the App refuses octokit's signature %s", theirs)
	}
	if ok != "true" {
		t.Fatalf("octokit refuses the App's signature: %s", out)
	}
}

// event is GitHub's example payload of event and action, validated against its webhook
// description.
func event(t *testing.T, name, action string) []byte {
	t.Helper()
	return githubtest.ValidateEvent(t, name, action, githubtest.Event(t, name, action))
}

// A delivery the queue refused is forgotten entirely: its redelivery, once accepted, is
// remembered for the full window, not evicted early by the refused one's stale place.
func TestRefusedDeliveryForgotten(t *testing.T) {
	d := newDeliveries(3)
	d.add("refused")
	d.remove("refused")
	for _, id := range []string{"a", "b", "refused"} {
		if !d.add(id) {
			t.Fatalf("%s was taken for a redelivery", id)
		}
	}
	if d.add("refused") {
		t.Fatal("the accepted redelivery is not remembered")
	}
	d.add("c") // evicts a, the oldest, and nothing else
	if d.add("refused") || d.add("b") {
		t.Fatal("an id within the window was evicted")
	}
	if len(d.order) != 3 || len(d.ids) != 3 {
		t.Fatalf("order %v, ids %v", d.order, d.ids)
	}
}
