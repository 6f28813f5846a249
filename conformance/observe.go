package conformance

// The observe behaviours: what an environment saw, read through the runtime (its sidecar's
// decision log and inbox, its services' logs), and a webhook delivered into it.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/github/delivery"
	"github.com/antifailure/af/manifest"
	"github.com/antifailure/af/runtime"
	"github.com/antifailure/af/sidecar/control"
	"github.com/antifailure/af/sidecar/decisionlog"
)

// The observe environment's names: a captured domain (nothing of it exists anywhere; the
// sidecar answers for it), and its webhook receiver's secret.
const (
	roleObserve     = "observe"
	capturedDomain  = "capture.af-conformance.test"
	capturedHost    = "hook." + capturedDomain
	capturedMailbox = "reviewer@" + capturedDomain
	capturedSMTP    = "smtp." + capturedDomain + ":25"
	credential      = "Authorization: Bearer af-conformance-credential"
	webhookSecret   = "af-conformance-webhook-secret"
	webhookPort     = 8090
)

// observed is the observe environment: one service that logs, receives verified webhooks, and
// whose egress captures one domain and allows the suite's allowed host.
func (s *suite) observed() *env {
	return s.up(roleObserve, func() (*manifest.Manifest, error) {
		return s.manifestFor("conformance-observe", map[string]any{
			"hooks": map[string]any{"image": s.opts.Image, "port": webhookPort,
				"env":     map[string]any{"WEBHOOK_SECRET": webhookSecret},
				"command": []string{"aftool", "serve", "-tcp", ":8080", "-udp", "", "-webhook", fmt.Sprintf(":%d", webhookPort)}},
		}, map[string]any{"default": "block", "rules": []any{
			map[string]any{"host": s.opts.Targets.AllowedHost, "ports": []int{80}},
			map[string]any{"host": "*." + capturedDomain, "mode": "capture"},
		}}, false)
	})
}

// observer is the runtime's Observer; a runtime that declares NetLog must have one.
func (s *suite) observer(t *testing.T) runtime.Observer {
	t.Helper()
	o := s.rt.Observer()
	if o == nil {
		t.Fatalf("the runtime declares the netlog capability but has no runtime.Observer")
	}
	return o
}

// fromObserved makes the observe environment's requests once: allowed, refused, captured.
func (s *suite) fromObserved(t *testing.T) *tried {
	t.Helper()
	return ran(t)(s.tryFromObserved())
}

// tryFromObserved is fromObserved for any goroutine.
func (s *suite) tryFromObserved() (*tried, error) {
	e := s.observed()
	if err := e.notUp(); err != nil {
		return nil, err
	}
	return s.try("observe", func(ctx context.Context, a []Attempt) ([]Outcome, error) {
		return s.h.Try(ctx, e.ref, "hooks", a)
	}, []Attempt{
		{Name: "allowed-proxy", Kind: HTTPProxy, Target: s.opts.Targets.AllowedHost},
		{Name: "unlisted-proxy", Kind: HTTPProxy, Target: s.opts.Targets.UnlistedHost},
		{Name: "captured-http", Kind: HTTPProxy, Target: capturedHost, Header: credential},
		{Name: "captured-mail", Kind: Mail, Target: capturedSMTP, To: capturedMailbox},
	}), nil
}

// decisions reads the observe environment's decision log through the runtime's link.
func (s *suite) decisions(t *testing.T) []decisionlog.Entry {
	t.Helper()
	e := s.observed()
	link, err := s.observer(t).Sidecar(s.context(t), e.ref)
	if err != nil {
		t.Fatalf("a link to the sidecar: %v", err)
	}
	defer link.Close()
	entries, _, err := (&control.Client{Addr: link.Addr}).Log(s.context(t), control.LogQuery{})
	if err != nil {
		t.Fatalf("the decision log through %s: %v", link.Via, err)
	}
	return entries
}

func logged(entries []decisionlog.Entry, host string, allowed bool) *decisionlog.Entry {
	for i, e := range entries {
		if strings.EqualFold(e.Host, host) && e.Allowed == allowed {
			return &entries[i]
		}
	}
	return nil
}

func blockedHostLogged(t *testing.T, s *suite) {
	m := s.fromObserved(t)
	notFromOrigin(t, m, "unlisted-proxy", s.opts.Targets.Banner)
	e := logged(s.decisions(t), s.opts.Targets.UnlistedHost, false)
	if e == nil || e.Rule == "" {
		t.Fatalf("the refused request to %s is not in the decision log with its rule: %+v", s.opts.Targets.UnlistedHost, e)
	}
	// Who asked: the address the request came from (the harness's throwaway instance of
	// hooks), and the runtime names the service's instances by the addresses they have.
	from := m.out["unlisted-proxy"].From
	if from == "" {
		t.Fatalf("the harness did not say where its attempts came from (Outcome.From)")
	}
	if e.Client != from {
		t.Fatalf("the refused request came from %s; the decision log says %q", from, e.Client)
	}
	ins, err := s.observer(t).Instances(s.context(t), s.observed().ref)
	if err != nil {
		t.Fatalf("the environment's instances: %v", err)
	}
	reach, err := s.h.Addresses(s.context(t), s.observed().ref, "hooks")
	if err != nil {
		t.Fatalf("the addresses of hooks: %v", err)
	}
	var hooks []string
	for _, in := range ins {
		if in.Service == "hooks" && in.Workload == "service" {
			for _, a := range in.Addresses {
				service, _ := runtime.Who(ins, a)
				if service != "hooks" || !hasHost(reach, a) {
					t.Errorf("the runtime lists %s at %s, which the platform does not (%v)", in.Name, a, reach)
				}
				hooks = append(hooks, in.Name+"="+a)
			}
		}
	}
	if len(hooks) == 0 {
		t.Fatalf("the runtime's instances name no instance of hooks: %+v", ins)
	}
	service, instance := "hooks (the harness's instance)", strings.Join(hooks, ",")
	t.Logf("logged: %s %s rule=%s mode=%s status=%d from %s (%s); the runtime names hooks: %s", e.Via, e.Host, e.Rule, e.Mode, e.Status, e.Client, service, instance)
}

// hasHost says whether one of the host:port addresses has host addr.
func hasHost(hostports []string, addr string) bool {
	for _, hp := range hostports {
		if h, _, err := net.SplitHostPort(hp); err == nil && h == addr {
			return true
		}
	}
	return false
}

func allowedHostLogged(t *testing.T, s *suite) {
	m := s.fromObserved(t)
	works(t, m, "allowed-proxy", s.opts.Targets.Banner)
	e := logged(s.decisions(t), s.opts.Targets.AllowedHost, true)
	if e == nil || e.Rule == "" {
		t.Fatalf("the allowed request to %s is not in the decision log with its rule: %+v", s.opts.Targets.AllowedHost, e)
	}
	t.Logf("logged: %s %s rule=%s status=%d", e.Via, e.Host, e.Rule, e.Status)
}

func captureInInbox(t *testing.T, s *suite) {
	m := s.fromObserved(t)
	works(t, m, "captured-http", "")
	works(t, m, "captured-mail", "250 ")
	e := s.observed()
	link, err := s.observer(t).Sidecar(s.context(t), e.ref)
	if err != nil {
		t.Fatalf("a link to the sidecar: %v", err)
	}
	defer link.Close()
	c := &control.Client{Addr: link.Addr}
	mail, err := c.Wait(s.context(t), control.InboxQuery{Kind: "smtp", To: capturedMailbox}, "", 30*time.Second)
	if err != nil {
		t.Fatalf("the mail to %s: %v", capturedMailbox, err)
	}
	req, err := c.Wait(s.context(t), control.InboxQuery{Kind: "http", Host: capturedHost}, "", 30*time.Second)
	if err != nil {
		t.Fatalf("the request to %s: %v", capturedHost, err)
	}
	name, value, _ := strings.Cut(credential, ": ")
	got := strings.Join(req.Header[name], ",")
	if got == "" || strings.Contains(got, value) {
		t.Errorf("the credential header %s of the captured request is %q: it must be kept, redacted", name, got)
	}
	t.Logf("inbox: mail %s (%q), request %s %s%s, %s: %s", mail.ID, mail.Subject, req.Method, req.Host, req.Path, name, got)
}

func logsOfAService(t *testing.T, s *suite) {
	e := s.main()
	e.must(t)
	var out bytes.Buffer
	if err := s.observer(t).Logs(s.context(t), e.ref, runtime.LogOptions{Service: "api"}, &out); err != nil {
		t.Fatalf("logs of api: %v", err)
	}
	if !strings.Contains(out.String(), "DEPENDENCY store answered") {
		t.Fatalf("the logs of api lack its own first line:\n%s", out.String())
	}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if inst, _, ok := strings.Cut(l, " | "); !ok || inst == "" {
			t.Fatalf("a line without the instance that wrote it: %q", l)
		}
	}
}

func logsOfACrashedService(t *testing.T, s *suite) {
	e := s.crashing()
	var out bytes.Buffer
	deadline := time.Now().Add(90 * time.Second)
	for {
		out.Reset()
		err := s.observer(t).Logs(s.context(t), e.ref, runtime.LogOptions{Service: "crasher", Previous: true}, &out)
		if err == nil && strings.Contains(out.String(), "about to fail") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the crashed service's previous container: %v\n%s", err, out.String())
		}
		time.Sleep(2 * time.Second)
	}
}

func webhookReachesService(t *testing.T, s *suite) {
	e := s.observed()
	e.must(t)
	link, err := s.observer(t).Service(s.context(t), e.ref, "hooks", webhookPort)
	if err != nil {
		t.Fatalf("a link to the service: %v", err)
	}
	defer link.Close()
	send := func(secret string) (int, string) {
		body, _ := delivery.Example("ping")
		h, err := delivery.Headers([]byte(secret), "ping", body)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(s.context(t), http.MethodPost, "http://"+link.Addr+"/webhook", bytes.NewReader(body))
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("delivering through %s: %v", link.Via, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(b)
	}
	if code, body := send(webhookSecret); code != http.StatusOK || !strings.Contains(body, "verified ping") {
		t.Errorf("a correctly signed delivery: %d %q", code, body)
	}
	if code, body := send("not-the-secret"); code != http.StatusUnauthorized {
		t.Errorf("control: a wrongly signed delivery was not refused: %d %q", code, body)
	}
}
