package action_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/antifailure/af/action"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/gate"
	"github.com/antifailure/af/github/githubtest"
	"github.com/antifailure/af/github/report"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/runtime/runtimetest"
	"github.com/antifailure/af/sidecar/decisionlog"
)

const token = "ghs_actiontoken0123456789"

const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: test
  user:
    token: kubetoken-s3cret-value
contexts:
- name: test
  context: {cluster: test, user: test}
current-context: test
`

const shop = `name: shop
runtime:
  provider: kubernetes
services:
  web:
    kind: web
    image: shop/web:1.0
    port: 8080
  worker:
    image: shop/worker:1.0
egress:
  default: block
  rules:
    - host: api.allowed.test
      ports: [443]
github:
  fork_policy: label
  label: af-preview
`

func probe(verdict string, escaped ...string) *gate.Result {
	res := &gate.Result{Verdict: verdict, Rounds: 3, MS: 812}
	for _, route := range []string{"tcp-public", "udp-dns", "metadata", "apiserver"} {
		a := gate.Attempt{Route: route, Target: "10.0.0.1:443", Outcome: gate.Denied, Detail: "connection refused", MS: 3}
		for _, e := range escaped {
			if e == route {
				a.Outcome, a.Detail = gate.Escaped, "answered"
				res.Escaped = append(res.Escaped, a)
			}
		}
		res.Routes = append(res.Routes, a)
	}
	return res
}

func upResult(env string) *afruntime.Result {
	return &afruntime.Result{Environment: env, Namespace: "af-env-" + env, Probe: probe(gate.Contained),
		Services: []afruntime.ServiceStatus{{Name: "web", Ready: 1, Desired: 1, CPU: "100m", Memory: "64Mi", State: "running"},
			{Name: "worker", Ready: 1, Desired: 1, State: "running"}},
		URLs: map[string]string{"web": "https://" + env + "-web.preview.af.test"}}
}

// job is one workflow job: its workspace, files and environment.
type job struct {
	t    testing.TB
	gh   *githubtest.Server
	rt   *runtimetest.Fake
	with afruntime.Runtime // when set, the runtime given instead of rt (one around it)
	// runtimeEnv is the environment the runtime was made with (the job's plus the inputs').
	runtimeEnv func(string) string
	dir        string
	inputs     map[string]string
	env        map[string]string
	rtMade     int
	mu         sync.Mutex
	summary    string
	output     string
}

func newJob(t testing.TB, gh *githubtest.Server, rt *runtimetest.Fake, manifestText string) *job {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "af.yaml"), []byte(manifestText), 0o644); err != nil {
		t.Fatal(err)
	}
	j := &job{t: t, gh: gh, rt: rt, dir: dir,
		inputs: map[string]string{"kubeconfig": kubeconfig, "token": token, "command": "up"},
		env: map[string]string{"GITHUB_REPOSITORY": "acme/shop", "GITHUB_WORKSPACE": dir, "GITHUB_API_URL": gh.URL,
			"GITHUB_SERVER_URL": "https://github.com", "GITHUB_RUN_ID": "77", "RUNNER_TEMP": t.TempDir(),
			"GITHUB_STEP_SUMMARY": filepath.Join(dir, "summary.md"), "GITHUB_OUTPUT": filepath.Join(dir, "output.txt")}}
	return j
}

func (j *job) event(name string, payload []byte) {
	p := filepath.Join(j.t.TempDir(), "event.json")
	if err := os.WriteFile(p, payload, 0o644); err != nil {
		j.t.Fatal(err)
	}
	j.env["GITHUB_EVENT_NAME"], j.env["GITHUB_EVENT_PATH"] = name, p
}

func (j *job) getenv(k string) string {
	if strings.HasPrefix(k, "INPUT_") {
		name := strings.ToLower(strings.TrimPrefix(k, "INPUT_"))
		return j.inputs[name]
	}
	return j.env[k]
}

func (j *job) run() (action.Outcome, string) {
	var out bytes.Buffer
	o := action.Run(context.Background(), action.Deps{Getenv: j.getenv, Out: &syncWriter{w: &out},
		Sleep: func(context.Context, time.Duration) error { return nil },
		Runtime: func(m *manifest.Manifest, getenv func(string) string, _ string) (afruntime.Runtime, error) {
			j.mu.Lock()
			j.rtMade++
			j.runtimeEnv = getenv
			j.mu.Unlock()
			if kc := getenv("KUBECONFIG"); kc == "" {
				j.t.Error("the runtime got no KUBECONFIG")
			} else if b, err := os.ReadFile(kc); err != nil || string(b) != strings.TrimSpace(kubeconfig) {
				j.t.Errorf("the kubeconfig file holds %q (%v)", b, err)
			}
			if j.with != nil {
				return j.with, nil
			}
			return j.rt, nil
		}})
	b, _ := os.ReadFile(j.env["GITHUB_STEP_SUMMARY"])
	j.summary = string(b)
	b, _ = os.ReadFile(j.env["GITHUB_OUTPUT"])
	j.output = string(b)
	return o, out.String()
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

var (
	sha1 = strings.Repeat("1", 40)
	sha2 = strings.Repeat("2", 40)
)

// The whole life of a pull request: opened → up, reported once; synchronize → the same
// comment edited, a new check on the new commit; down → gone, comment rewritten, inactive.
func TestPullRequestLife(t *testing.T) {
	gh := githubtest.New(t, token)
	rt := &runtimetest.Fake{UpResult: upResult("shop-pr-7")}
	j := newJob(t, gh, rt, shop)
	gh.SetFile("main", "af.yaml", shop)
	j.event("pull_request", githubtest.PullRequestEvent(t, "opened", "acme/shop", 7, sha1, false))

	o, log := j.run()
	if o.Exit != 0 || o.Err != nil {
		t.Fatalf("exit %d: %v\n%s", o.Exit, o.Err, log)
	}
	comments := gh.Comments(7)
	if len(comments) != 1 || comments[0].Login != githubtest.BotLogin {
		t.Fatalf("comments %+v, want exactly one by the bot", comments)
	}
	body := comments[0].Body
	for _, want := range []string{report.Marker, "Preview ready", "https://shop-pr-7-web.preview.af.test", "| tcp-public | denied", "| udp-dns | denied", "| metadata | denied", "| apiserver | denied", "1111111", "| web | 1/1 | running | 100m / 64Mi |"} {
		if !strings.Contains(body, want) {
			t.Errorf("the comment lacks %q:\n%s", want, body)
		}
	}
	checks := gh.CheckRuns()
	if len(checks) != 1 || checks[0].HeadSHA != sha1 || checks[0].Conclusion != "success" || checks[0].Name != report.CheckName {
		t.Fatalf("check runs %+v", checks)
	}
	deps := gh.Deployments()
	if len(deps) != 1 || deps[0].Environment != "pr-7" || deps[0].SHA != sha1 || deps[0].AutoMerge || !deps[0].Transient || len(deps[0].Contexts) != 0 {
		t.Fatalf("deployments %+v", deps)
	}
	last := deps[0].Statuses[len(deps[0].Statuses)-1]
	if last.State != "success" || last.EnvironmentURL != "https://shop-pr-7-web.preview.af.test" {
		t.Fatalf("deployment statuses %+v", deps[0].Statuses)
	}
	for _, want := range []string{"url<<", "https://shop-pr-7-web.preview.af.test", "namespace<<", "af-env-shop-pr-7", "contained<<", "true", `"route":"tcp-public"`} {
		if !strings.Contains(j.output, want) {
			t.Errorf("outputs lack %q:\n%s", want, j.output)
		}
	}
	if !strings.Contains(j.summary, "Preview ready") {
		t.Errorf("step summary: %q", j.summary)
	}
	for _, secret := range []string{token, "kubetoken-s3cret-value"} {
		if !strings.Contains(log, "::add-mask::"+secret) {
			t.Errorf("%s was not masked", secret)
		}
	}
	calls := acts(rt)
	if len(calls) != 1 || calls[0].Method != "Up" || calls[0].Spec.ID != "shop-pr-7" || calls[0].Spec.PullRequest != 7 {
		t.Fatalf("runtime calls %+v", calls)
	}
	t.Logf("reporting overhead of an up: %d GitHub requests in %s", o.Requests, o.GitHub)

	// A new push: the same comment, edited; a new check on the new head.
	j.event("pull_request", githubtest.PullRequestEvent(t, "synchronize", "acme/shop", 7, sha2, false))
	if o, log := j.run(); o.Exit != 0 {
		t.Fatalf("synchronize: exit %d: %v\n%s", o.Exit, o.Err, log)
	}
	after := gh.Comments(7)
	if len(after) != 1 || after[0].ID != comments[0].ID || !strings.Contains(after[0].Body, "2222222") {
		t.Fatalf("after synchronize: comments %+v", after)
	}
	if checks := gh.CheckRuns(); len(checks) != 2 || checks[1].HeadSHA != sha2 || checks[1].Conclusion != "success" {
		t.Fatalf("after synchronize: check runs %+v", checks)
	}

	// Down.
	j.inputs["command"] = "down"
	j.event("pull_request", githubtest.PullRequestEvent(t, "closed", "acme/shop", 7, sha2, false))
	if o, log := j.run(); o.Exit != 0 {
		t.Fatalf("down: exit %d: %v\n%s", o.Exit, o.Err, log)
	}
	gone := gh.Comments(7)
	if len(gone) != 1 || gone[0].ID != comments[0].ID || !strings.Contains(gone[0].Body, "Preview removed") || !strings.Contains(gone[0].Body, "the pull request was closed") {
		t.Fatalf("after down: comments %+v", gone)
	}
	for _, d := range gh.Deployments() {
		if st := d.Statuses[len(d.Statuses)-1]; st.State != "inactive" {
			t.Fatalf("deployment %d left %s after down", d.ID, st.State)
		}
	}
	if c := acts(rt); c[len(c)-1].Method != "Down" || c[len(c)-1].Ref.ID != "shop-pr-7" {
		t.Fatalf("runtime calls %+v", c)
	}
}

// On a cluster that does not enforce, the step fails with AF-RUN-043 and the check names the
// routes that got out.
func TestNotContained(t *testing.T) {
	gh := githubtest.New(t, token)
	res := upResult("shop-pr-8")
	res.Probe = probe(gate.Escape, "tcp-public", "metadata")
	res.Services, res.URLs = nil, nil
	rt := &runtimetest.Fake{UpResult: res, UpErr: failure.Newf(failure.NotContained, "the probe got out by tcp-public, metadata; no service image was run")}
	j := newJob(t, gh, rt, shop)
	j.event("pull_request", githubtest.PullRequestEvent(t, "opened", "acme/shop", 8, sha1, false))
	o, log := j.run()
	if o.Exit != failure.ExitRefused || !strings.Contains(log, "::error::AF-RUN-043") {
		t.Fatalf("exit %d, want %d with an AF-RUN-043 error annotation\n%s", o.Exit, failure.ExitRefused, log)
	}
	check := gh.CheckRuns()[0]
	if check.Conclusion != "failure" || !strings.Contains(check.Title, "tcp-public, metadata") {
		t.Fatalf("check %+v", check)
	}
	body := gh.Comments(8)[0].Body
	if !strings.Contains(body, "Not contained") || !strings.Contains(body, "| tcp-public | **escaped**") {
		t.Fatalf("comment:\n%s", body)
	}
	if st := gh.Deployments()[0].Statuses; st[len(st)-1].State != "failure" {
		t.Fatalf("deployment statuses %+v", st)
	}
	if strings.Contains(j.output, "contained<<") && !strings.Contains(j.output, "false") {
		t.Fatalf("outputs: %s", j.output)
	}
}

// What the sidecar refused while the environment started is on the comment: each host, port
// and rule once, with how often.
func TestBlockedHostsOnTheComment(t *testing.T) {
	gh := githubtest.New(t, token)
	o := runtimetest.NewObserved()
	o.UpResult = upResult("shop-pr-9")
	for i := 0; i < 3; i++ {
		o.Log.Record(decisionlog.Entry{Via: "proxy", Method: "GET", Host: "tracker.ads.test", Port: 443, Rule: "default", Mode: "block", Status: 403})
	}
	o.Log.Record(decisionlog.Entry{Via: "proxy", Host: "api.allowed.test", Port: 443, Rule: "api.allowed.test", Mode: "allow", Allowed: true})
	j := newJob(t, gh, o.Fake, shop)
	j.with = o
	j.event("pull_request", githubtest.PullRequestEvent(t, "opened", "acme/shop", 9, sha1, false))
	if out, log := j.run(); out.Exit != 0 {
		t.Fatalf("exit %d\n%s", out.Exit, log)
	}
	body := gh.Comments(9)[0].Body
	if !strings.Contains(body, "Blocked by the egress sidecar") || !strings.Contains(body, "`tracker.ads.test:443`: rule default, 3 time(s)") || strings.Contains(body, "`api.allowed.test:443`") {
		t.Fatalf("comment:\n%s", body)
	}
	if n, _ := o.Links(); n != 0 {
		t.Fatalf("%d links to the sidecar left open", n)
	}
}

// A run that times out still finishes what it told the pull request: the check run completed
// as failed, the deployment's status failure, the comment written, and what the sidecar
// refused (it matters most when af up fails) listed on it.
func TestTimedOutRunStillReports(t *testing.T) {
	gh := githubtest.New(t, token)
	o := runtimetest.NewObserved()
	o.UpBlocks = true
	o.UpErr = failure.Newf(failure.NotReady, "web: not ready before the deadline")
	o.Log.Record(decisionlog.Entry{Via: "proxy", Method: "GET", Host: "db.internal.test", Port: 5432, Rule: "default", Mode: "block", Status: 403})
	j := newJob(t, gh, o.Fake, shop)
	j.with = o
	j.inputs["timeout"] = "1s"
	j.event("pull_request", githubtest.PullRequestEvent(t, "opened", "acme/shop", 9, sha1, false))
	out, log := j.run()
	if out.Exit == 0 || !errors.Is(out.Err, failure.NotReady) {
		t.Fatalf("exit %d (%v), want the timeout's failure\n%s", out.Exit, out.Err, log)
	}
	if len(out.Reported) != 0 {
		t.Fatalf("reporting steps failed after the timeout: %v\n%s", out.Reported, log)
	}
	if c := gh.CheckRuns(); len(c) != 1 || c[0].Status != "completed" || c[0].Conclusion != "failure" {
		t.Fatalf("check runs %+v, want one completed as failure", c)
	}
	d := gh.Deployments()
	if len(d) != 1 || len(d[0].Statuses) == 0 || d[0].Statuses[len(d[0].Statuses)-1].State != "failure" {
		t.Fatalf("deployments %+v, want one whose last status is failure", d)
	}
	c := gh.Comments(9)
	if len(c) != 1 || !strings.Contains(c[0].Body, "AF-RUN-004") || !strings.Contains(c[0].Body, "db.internal.test:5432") {
		t.Fatalf("comments %+v, want one naming the failure and the blocked host", c)
	}
}

// The environment removed while the run brought it up (the pull request closed: the App took
// it down and said so): the step fails with AF-RUN-058, the check run is cancelled, the
// deployment inactive, and the App's comment is left as it is; the run names itself to the
// runtime as its holder.
func TestRemovedWhileItRan(t *testing.T) {
	gh := githubtest.New(t, token)
	rt := &runtimetest.Fake{UpErr: failure.Newf(failure.EnvironmentRemoved, "environment shop-pr-9 was removed while af up ran")}
	j := newJob(t, gh, rt, shop)
	j.env["GITHUB_SERVER_URL"], j.env["GITHUB_RUN_ID"] = "https://github.com", "4242"
	j.event("pull_request", githubtest.PullRequestEvent(t, "opened", "acme/shop", 9, sha1, false))
	out, log := j.run()
	if !errors.Is(out.Err, failure.EnvironmentRemoved) {
		t.Fatalf("exit %d (%v), want AF-RUN-058\n%s", out.Exit, out.Err, log)
	}
	if c := gh.CheckRuns(); len(c) != 1 || c[0].Conclusion != "cancelled" {
		t.Errorf("check runs %+v, want one cancelled", c)
	}
	if d := gh.Deployments(); len(d) != 1 || d[0].Statuses[len(d[0].Statuses)-1].State != "inactive" {
		t.Errorf("deployments %+v, want the last status inactive", d)
	}
	if c := gh.Comments(9); len(c) != 0 {
		t.Errorf("comments %+v: the run wrote over what the remover said", c)
	}
	if c := acts(rt); len(c) != 1 || c[0].Spec.Holder != "https://github.com/acme/shop/actions/runs/4242 (commit "+sha1[:7]+")" {
		t.Errorf("runtime calls %+v, want one naming this run as the holder", c)
	}
}

// Two runs for the same pull request at once leave exactly one comment.
func TestRacingRunsLeaveOneComment(t *testing.T) {
	gh := githubtest.New(t, token)
	gh.Delay = 5 * time.Millisecond
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		rt := &runtimetest.Fake{UpResult: upResult("shop-pr-9")}
		j := newJob(t, gh, rt, shop)
		j.event("pull_request", githubtest.PullRequestEvent(t, "synchronize", "acme/shop", 9, sha1, false))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o, log := j.run(); o.Exit != 0 {
				t.Errorf("exit %d: %v\n%s", o.Exit, o.Err, log)
			}
		}()
	}
	wg.Wait()
	if c := gh.Comments(9); len(c) != 1 {
		t.Fatalf("%d comments after three racing runs, want 1", len(c))
	}
}

// Someone else's comment carrying the marker is never edited: the bot writes its own.
func TestForeignMarkerIgnored(t *testing.T) {
	gh := githubtest.New(t, token)
	foreign := gh.AddComment(10, "mallory", report.Marker+"\nfake preview")
	j := newJob(t, gh, &runtimetest.Fake{UpResult: upResult("shop-pr-10")}, shop)
	j.event("pull_request", githubtest.PullRequestEvent(t, "opened", "acme/shop", 10, sha1, false))
	if o, _ := j.run(); o.Exit != 0 {
		t.Fatal(o.Err)
	}
	c := gh.Comments(10)
	if len(c) != 2 || c[0].ID != foreign || c[0].Body != report.Marker+"\nfake preview" || c[1].Login != githubtest.BotLogin {
		t.Fatalf("comments %+v", c)
	}
}

func TestForks(t *testing.T) {
	cases := []struct {
		name      string
		event     string
		action    string
		labels    []string
		policy    string
		runs      bool
		githubUse bool // whether the run may talk to GitHub at all
		labelGone bool
	}{
		{"pull_request from a fork: read-only, nothing", "pull_request", "opened", []string{"af-preview"}, "label", false, false, false},
		{"target without the label", "pull_request_target", "opened", nil, "label", false, true, false},
		{"target with the label", "pull_request_target", "labeled", []string{"af-preview"}, "label", true, true, false},
		{"target, new push removes the label", "pull_request_target", "synchronize", []string{"af-preview"}, "label", false, true, true},
		{"target, reopening removes the label", "pull_request_target", "reopened", []string{"af-preview"}, "label", false, true, true},
		{"never", "pull_request_target", "labeled", []string{"af-preview"}, "never", false, true, false},
		{"always", "pull_request_target", "opened", nil, "always", true, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gh := githubtest.New(t, token)
			m := strings.Replace(shop, "fork_policy: label", "fork_policy: "+tc.policy, 1)
			gh.SetFile("main", "af.yaml", m)
			gh.SetLabels(11, tc.labels...)
			rt := &runtimetest.Fake{UpResult: upResult("shop-pr-11")}
			j := newJob(t, gh, rt, m)
			j.event(tc.event, githubtest.PullRequestEvent(t, tc.action, "acme/shop", 11, sha1, true, tc.labels...))
			o, log := j.run()
			if o.Exit != 0 {
				t.Fatalf("exit %d (%v): a fork never fails the step\n%s", o.Exit, o.Err, log)
			}
			if ran := len(acts(rt)) > 0; ran != tc.runs {
				t.Fatalf("runtime used: %v, want %v (%+v)", ran, tc.runs, acts(rt))
			}
			if !tc.runs && j.rtMade != 0 {
				t.Fatalf("the runtime was built (the kubeconfig read) %d times for a run that may not run", j.rtMade)
			}
			if used := len(gh.Calls()) > 0; used != tc.githubUse {
				t.Fatalf("GitHub used: %v, want %v (%+v)", used, tc.githubUse, gh.Calls())
			}
			if !tc.runs && tc.githubUse {
				if c := gh.CheckRuns(); len(c) != 1 || c[0].Conclusion != "neutral" {
					t.Fatalf("check runs %+v, want one neutral", c)
				}
				if c := gh.Comments(11); len(c) != 1 || !strings.Contains(c[0].Body, "needs a maintainer's approval") {
					t.Fatalf("comments %+v", c)
				}
			}
			if !tc.githubUse && !strings.Contains(j.summary, "fork") {
				t.Fatalf("step summary %q does not say why", j.summary)
			}
			if tc.labelGone && len(gh.Labels(11)) != 0 {
				t.Fatalf("labels after a new push: %v", gh.Labels(11))
			}
		})
	}
}

// A fork's pull_request run gets no secrets: no kubeconfig, no token. It exits 0 with the step
// summary saying why, before any input is required, and writes nothing to GitHub.
func TestForkPullRequestWithoutSecrets(t *testing.T) {
	gh := githubtest.New(t, token)
	rt := &runtimetest.Fake{UpResult: upResult("shop-pr-11")}
	j := newJob(t, gh, rt, shop)
	delete(j.inputs, "kubeconfig")
	delete(j.inputs, "token")
	j.event("pull_request", githubtest.PullRequestEvent(t, "opened", "acme/shop", 11, sha1, true))
	o, log := j.run()
	if o.Exit != 0 || !errors.Is(o.Err, failure.ForkNotApproved) {
		t.Fatalf("exit %d (%v), want 0 and %s\n%s", o.Exit, o.Err, failure.ForkNotApproved.Code, log)
	}
	if strings.Contains(log, "::error") || !strings.Contains(log, "::notice::") {
		t.Fatalf("the log has an error or no notice:\n%s", log)
	}
	if len(gh.Calls()) != 0 || j.rtMade != 0 || len(acts(rt)) != 0 {
		t.Fatalf("GitHub calls %v, runtimes made %d, runtime calls %v: a fork's run touches nothing", gh.Calls(), j.rtMade, acts(rt))
	}
	if !strings.Contains(j.summary, "comes from a fork") {
		t.Fatalf("step summary %q does not say why", j.summary)
	}
}

// A pull request that widens egress runs under the base branch's rules unless approved.
func TestEgressWidening(t *testing.T) {
	wider := strings.Replace(shop, "    - host: api.allowed.test\n", "    - host: evil.test\n      mode: allow\n    - cidr: 10.20.0.0/16\n    - host: api.allowed.test\n", 1)
	for _, approved := range []bool{false, true} {
		t.Run(map[bool]string{false: "not approved", true: "approved"}[approved], func(t *testing.T) {
			gh := githubtest.New(t, token)
			gh.SetFile("main", "af.yaml", shop)
			if approved {
				gh.SetLabels(12, "af-preview")
			}
			rt := &runtimetest.Fake{UpResult: upResult("shop-pr-12")}
			j := newJob(t, gh, rt, wider)
			j.event("pull_request", githubtest.PullRequestEvent(t, "opened", "acme/shop", 12, sha1, false))
			o, log := j.run()
			if o.Exit != 0 {
				t.Fatalf("exit %d: %v\n%s", o.Exit, o.Err, log)
			}
			got := acts(rt)[0].Spec.Manifest.Egress.Rules
			body := gh.Comments(12)[0].Body
			if approved {
				if len(got) != 3 || strings.Contains(body, "left out") {
					t.Fatalf("approved: rules %+v, comment:\n%s", got, body)
				}
				return
			}
			if len(got) != 1 || got[0].Host != "api.allowed.test" {
				t.Fatalf("not approved: the environment got rules %+v, want the base branch's one", got)
			}
			for _, want := range []string{"Egress rules left out", "host evil.test, every port: allow", "cidr 10.20.0.0/16, every port: allow"} {
				if !strings.Contains(body, want) {
					t.Errorf("comment lacks %q:\n%s", want, body)
				}
			}
			if !strings.Contains(log, "AF-GH-006") {
				t.Errorf("no AF-GH-006 warning in the log")
			}
			// Its down runs nothing: no word on egress, and no label read for it.
			before := len(gh.Calls())
			j.inputs["command"] = "down"
			j.event("pull_request", githubtest.PullRequestEvent(t, "closed", "acme/shop", 12, sha1, false))
			o, log = j.run()
			if o.Exit != 0 || strings.Contains(log, "AF-GH-006") {
				t.Errorf("down: exit %d; an egress warning in its log:\n%s", o.Exit, log)
			}
			for _, c := range gh.Calls()[before:] {
				if strings.Contains(c.Path, "/labels") {
					t.Errorf("down read the labels: %s %s", c.Method, c.Path)
				}
			}
		})
	}
}

func TestInputsRefused(t *testing.T) {
	cases := []struct{ input, value, want string }{
		{"command", "deploy", "input command"},
		{"kubeconfig", "", "input kubeconfig"},
		{"kubeconfig", "/home/runner/.kube/config", "input kubeconfig"},
		{"kubeconfig", strings.Replace(kubeconfig, "token: kubetoken-s3cret-value", "client-key: /home/runner/admin.key", 1), "names files (client-key)"},
		{"token", "", "input token"},
		{"pr-number", "seven", "input pr-number"},
		{"images", "web", "input images"},
		{"timeout", "soon", "input timeout"},
		{"manifest", "../other/af.yaml", "input manifest"},
	}
	for _, tc := range cases {
		t.Run(tc.input+"="+tc.value, func(t *testing.T) {
			gh := githubtest.New(t, token)
			rt := &runtimetest.Fake{}
			j := newJob(t, gh, rt, shop)
			j.inputs[tc.input] = tc.value
			j.event("pull_request", githubtest.PullRequestEvent(t, "opened", "acme/shop", 13, sha1, false))
			o, log := j.run()
			if o.Exit != failure.ExitInput || !strings.Contains(log, "::error::AF-GH-001") || !strings.Contains(log, tc.want) {
				t.Fatalf("exit %d, log:\n%s", o.Exit, log)
			}
			if len(acts(rt)) != 0 || len(gh.Calls()) != 0 {
				t.Fatalf("bad input still did something: runtime %v, GitHub %v", acts(rt), gh.Calls())
			}
		})
	}
}

// An invalid manifest fails the check with each problem on its line.
func TestManifestAnnotations(t *testing.T) {
	gh := githubtest.New(t, token)
	bad := strings.Replace(shop, "port: 8080", "port: 99999", 1)
	j := newJob(t, gh, &runtimetest.Fake{}, bad)
	j.event("pull_request", githubtest.PullRequestEvent(t, "opened", "acme/shop", 14, sha1, false))
	o, log := j.run()
	if o.Exit != failure.ExitInput {
		t.Fatalf("exit %d\n%s", o.Exit, log)
	}
	c := gh.CheckRuns()
	if len(c) != 1 || c[0].Conclusion != "failure" || len(c[0].Annotations) == 0 {
		t.Fatalf("check runs %+v", c)
	}
	a := c[0].Annotations[0]
	if a["path"] != "af.yaml" || a["start_line"] != float64(8) {
		t.Fatalf("annotation %+v, want af.yaml line 8", a)
	}
	if !strings.Contains(log, "::error file=af.yaml,line=8::") {
		t.Fatalf("no workflow annotation on line 8:\n%s", log)
	}
}

// A failed report never hides how the environment went: the step's status is the environment's.
func TestReportingFailureTolerated(t *testing.T) {
	gh := githubtest.New(t, "some-other-token") // the action's token is refused: 401 everywhere
	rt := &runtimetest.Fake{UpResult: upResult("shop-pr-15")}
	j := newJob(t, gh, rt, shop)
	j.event("pull_request", githubtest.PullRequestEvent(t, "opened", "acme/shop", 15, sha1, false))
	o, log := j.run()
	if o.Exit != 0 || len(acts(rt)) != 1 {
		t.Fatalf("exit %d with calls %v\n%s", o.Exit, acts(rt), log)
	}
	if len(o.Reported) == 0 || !strings.Contains(log, "::warning::reporting on the pull request") || !strings.Contains(log, "AF-GH-003") {
		t.Fatalf("reporting failures %v not warned of:\n%s", o.Reported, log)
	}
	rt.UpErr = failure.Newf(failure.NotReady, "web did not become ready")
	if o, _ := j.run(); o.Exit != failure.ExitFailure {
		t.Fatalf("a failed environment exited %d while reporting failed", o.Exit)
	}
}

// A build: service with no image given is built with the daemon; with none answering, the step
// fails with AF-RUN-008 naming the service, and the check says so. No environment is touched.
func TestBuildWithoutDaemon(t *testing.T) {
	gh := githubtest.New(t, token)
	rt := &runtimetest.Fake{UpResult: upResult("shop-pr-16")}
	built := strings.Replace(shop, "    image: shop/worker:1.0\n", "    build: {context: worker}\n", 1)
	j := newJob(t, gh, rt, built)
	j.env["DOCKER_HOST"] = "unix://" + filepath.Join(t.TempDir(), "no-daemon.sock")
	j.event("pull_request", githubtest.PullRequestEvent(t, "opened", "acme/shop", 16, sha1, false))
	o, log := j.run()
	if o.Exit != failure.ExitFailure || !strings.Contains(log, "AF-RUN-008") || !strings.Contains(log, "worker") {
		t.Fatalf("exit %d\n%s", o.Exit, log)
	}
	if len(acts(rt)) != 0 {
		t.Fatalf("the runtime was asked %v before the images existed", acts(rt))
	}
	if c := gh.CheckRuns(); len(c) != 1 || c[0].Conclusion != "failure" || !strings.Contains(c[0].Title, "AF-RUN-008") {
		t.Fatalf("check runs %+v", c)
	}
}

// workflow_dispatch names the pull request by input; the commit is the dispatched ref's.
func TestWorkflowDispatch(t *testing.T) {
	gh := githubtest.New(t, token)
	gh.SetPull(17, "open", sha2, false)
	gh.SetPullHead(17, "acme/shop", baseSHA)
	gh.SetFile("main", "af.yaml", shop)
	rt := &runtimetest.Fake{UpResult: upResult("shop-pr-17")}
	// The pull request's af.yaml tries an operator's setting: held to the default branch's, as
	// under its pull_request run.
	j := newJob(t, gh, rt, strings.Replace(shop, "fork_policy: label", "fork_policy: always", 1))
	j.env["GITHUB_EVENT_NAME"], j.env["GITHUB_SHA"], j.env["GITHUB_REF"] = "workflow_dispatch", sha2, "refs/heads/feature"
	ev := githubtest.Event(t, "workflow_dispatch", "")
	ev["repository"].(map[string]any)["default_branch"] = "main"
	j.event("workflow_dispatch", githubtest.ValidateEvent(t, "workflow_dispatch", "", ev))
	j.inputs["pr-number"] = "17"
	if o, log := j.run(); o.Exit != 0 {
		t.Fatalf("exit %d: %v\n%s", o.Exit, o.Err, log)
	}
	if c := acts(rt); len(c) != 1 || c[0].Spec.ID != "shop-pr-17" || c[0].Spec.Manifest.GitHub.ForkPolicy != "label" {
		t.Fatalf("runtime calls %+v", c)
	}
	if c := gh.CheckRuns(); len(c) != 1 || c[0].HeadSHA != sha2 {
		t.Fatalf("check runs %+v", c)
	}
	// Dispatched on another commit than the pull request's head: refused, nothing deployed.
	j.env["GITHUB_SHA"] = sha1
	if o, log := j.run(); o.Exit != failure.ExitInput || !strings.Contains(log, "pull request #17's head is "+sha2) || len(acts(rt)) != 1 {
		t.Fatalf("exit %d, runtime calls %d\n%s", o.Exit, len(acts(rt)), log)
	}
	// A fork's pull request: never by a dispatch, whatever was dispatched.
	gh.SetPull(19, "open", sha1, false)
	gh.SetPullHead(19, "someone/shop", baseSHA)
	j.inputs["pr-number"] = "19"
	if o, log := j.run(); o.Exit != 0 || !errors.Is(o.Err, failure.ForkNotApproved) || len(acts(rt)) != 1 || j.rtMade != 1 {
		t.Fatalf("a dispatch for a fork's pull request: exit %d err %v, runtime calls %d, made %d\n%s", o.Exit, o.Err, len(acts(rt)), j.rtMade, log)
	}
	j.inputs["pr-number"] = "17"
	j.env["GITHUB_SHA"] = sha2
	// Without pr-number or environment there is nothing to name the environment by.
	delete(j.inputs, "pr-number")
	if o, log := j.run(); o.Exit != failure.ExitInput || !strings.Contains(log, "input pr-number") {
		t.Fatalf("exit %d\n%s", o.Exit, log)
	}
	// An environment id instead: no pull request to report on, only the summary and outputs.
	j.inputs["environment"] = "shop-manual"
	rt.UpResult = upResult("shop-manual")
	before := len(gh.Calls())
	if o, log := j.run(); o.Exit != 0 {
		t.Fatalf("exit %d: %v\n%s", o.Exit, o.Err, log)
	}
	if c := acts(rt); c[len(c)-1].Spec.ID != "shop-manual" {
		t.Fatalf("runtime calls %+v", c)
	}
	if n := len(gh.Calls()); n != before {
		t.Fatalf("%d GitHub requests for an environment with no pull request", n-before)
	}
}

// Each part of the report is switchable by the manifest's github: block.
func TestReportSwitches(t *testing.T) {
	gh := githubtest.New(t, token)
	off := strings.Replace(shop, "github:\n", "github:\n  comment: false\n  deployment: false\n", 1)
	j := newJob(t, gh, &runtimetest.Fake{UpResult: upResult("shop-pr-18")}, off)
	gh.SetFile("main", "af.yaml", off)
	j.event("pull_request", githubtest.PullRequestEvent(t, "opened", "acme/shop", 18, sha1, false))
	if o, log := j.run(); o.Exit != 0 {
		t.Fatalf("exit %d: %v\n%s", o.Exit, o.Err, log)
	}
	if len(gh.Comments(18)) != 0 || len(gh.Deployments()) != 0 || len(gh.CheckRuns()) != 1 {
		t.Fatalf("comments %d, deployments %d, checks %d: want only the check", len(gh.Comments(18)), len(gh.Deployments()), len(gh.CheckRuns()))
	}
}

// BenchmarkReportingOverhead measures what the action adds to af up: GitHub requests and their
// time per run (a pull request's first run, against the stand-in on loopback).
func BenchmarkReportingOverhead(b *testing.B) {
	gh := githubtest.New(b, token)
	var requests int
	var spent time.Duration
	for i := 0; i < b.N; i++ {
		j := newJob(b, gh, &runtimetest.Fake{UpResult: upResult("shop-pr-19")}, shop)
		j.event("pull_request", githubtest.PullRequestEvent(b, "synchronize", "acme/shop", 19, sha1, false))
		o, log := j.run()
		if o.Exit != 0 {
			b.Fatalf("exit %d\n%s", o.Exit, log)
		}
		requests += o.Requests
		spent += o.GitHub
	}
	b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
	b.ReportMetric(float64(spent.Microseconds())/float64(b.N), "github-µs/op")
}

// acts are the runtime's calls that do something: not the read that finds a pull request's
// environment by its labels (Environments).
func acts(rt *runtimetest.Fake) []runtimetest.Call {
	var out []runtimetest.Call
	for _, c := range rt.Calls() {
		if c.Method != "Environments" {
			out = append(out, c)
		}
	}
	return out
}
