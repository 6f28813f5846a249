package action

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sethvargo/go-githubactions"

	"github.com/antifailure/af/envid"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/ghclient"
	"github.com/antifailure/af/images"
	"github.com/antifailure/af/manifest"
	"github.com/antifailure/af/prreport"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/runtime/kubernetes"
	"github.com/antifailure/af/settings"
	"github.com/antifailure/af/sidecar/control"
)

// Deps are what Run needs from its surroundings; the zero value of each optional one is the
// real thing.
type Deps struct {
	// Getenv reads the job's environment (required).
	Getenv func(string) string
	// Out receives the log and the workflow commands (default os.Stdout).
	Out io.Writer
	// Runtime returns the runtime for the manifest, with getenv the job's environment plus
	// what the inputs set (KUBECONFIG, AF_REGISTRY_*). Default: the kubernetes runtime.
	Runtime func(m *manifest.Manifest, getenv func(string) string, kubeContext string) (afruntime.Runtime, error)
	// HTTP is the transport to GitHub (default http.DefaultTransport).
	HTTP http.RoundTripper
	// Bot is the login the token writes as (default github-actions[bot]).
	Bot string
	// Sleep replaces waiting out rate limits (tests).
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Outcome is what a run did, for tests and for the measured overhead.
type Outcome struct {
	Exit     int
	Facts    *prreport.Facts
	Err      error
	Reported []string // the reporting steps that failed
	Requests int      // GitHub API requests made
	GitHub   time.Duration
	Up       time.Duration
}

type run struct {
	d     Deps
	gha   *githubactions.Action
	in    Inputs
	ev    Event
	repo  string
	rep   *prreport.Reporter
	stats *ghclient.Stats
	man   *manifest.Manifest
	res   *manifest.Result
	env   map[string]string
	out   Outcome
	// blocked is what the sidecar refused while the environment started (its migrations and
	// services' first calls), for the comment.
	blocked []prreport.BlockedHost
}

func (r *run) getenv(k string) string {
	if v, ok := r.env[k]; ok {
		return v
	}
	return r.d.Getenv(k)
}

func (r *run) now() time.Time {
	if r.d.Now != nil {
		return r.d.Now()
	}
	return time.Now()
}

func (r *run) logf(format string, args ...any) {
	io.WriteString(r.d.Out, "af: "+strings.TrimRight(fmt.Sprintf(format, args...), "\n")+"\n")
}

// lockedWriter makes each Write to w whole and safe from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Run runs the action and returns its outcome; Outcome.Exit is the step's exit status.
func Run(ctx context.Context, d Deps) Outcome {
	if d.Out == nil {
		d.Out = os.Stdout
	}
	// The runtime reports progress from several goroutines at once; every write is whole.
	d.Out = &lockedWriter{w: d.Out}
	if d.Bot == "" {
		d.Bot = "github-actions[bot]"
	}
	r := &run{d: d, env: map[string]string{}}
	r.gha = githubactions.New(githubactions.WithGetenv(d.Getenv), githubactions.WithWriter(d.Out))
	err := r.main(ctx)
	r.out.Err = err
	if r.stats != nil {
		r.out.Requests, _, _, r.out.GitHub = r.stats.Snapshot()
	}
	if err != nil {
		fe := failure.Ensure(err)
		if fe.Entry == failure.ForkNotApproved {
			r.gha.Noticef("%s", fe.Error())
			r.out.Exit = 0
			return r.out
		}
		r.gha.Errorf("%s", fe.Error())
		fmt.Fprintf(r.d.Out, "What it means: %s\nWhat to do: %s\n", fe.Entry.Means, fe.Report().Do)
		r.out.Exit = fe.Exit()
		return r.out
	}
	return r.out
}

func (r *run) main(ctx context.Context) error {
	var err error
	// Secrets are masked before anything else can print them.
	for _, name := range []string{"token", "registry-password"} {
		if v := r.gha.GetInput(name); v != "" {
			r.gha.AddMask(v)
		}
	}
	for _, s := range secretsOf(r.gha.GetInput("kubeconfig")) {
		r.gha.AddMask(s)
	}
	if r.in, err = ReadInputs(r.gha.GetInput); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, r.in.Timeout)
	defer cancel()
	if r.ev, err = ReadEvent(r.d.Getenv, r.in.PRNumber); err != nil {
		return err
	}
	r.repo = r.d.Getenv("GITHUB_REPOSITORY")
	if r.ev.Name == "workflow_dispatch" && r.ev.PullRequest == 0 && r.in.Environment == "" {
		return failure.Newf(failure.ActionInputInvalid, "input pr-number: workflow_dispatch needs pr-number or environment to name the environment")
	}
	if r.ev.Name == "pull_request" && r.ev.Fork && r.in.Command != "status" {
		// A fork's pull_request run has a read-only token and no secrets: say so where it can be
		// read, and touch nothing.
		f := &prreport.Facts{State: prreport.Skipped, PullRequest: r.ev.PullRequest, Commit: r.ev.HeadSHA,
			Reason: "This pull request comes from a fork, and its `pull_request` run has a read-only token and no secrets, so nothing ran. With `fork_policy: label` a maintainer approves it by adding the label; the `pull_request_target` workflow then runs it."}
		r.summary(f)
		return failure.Newf(failure.ForkNotApproved, "pull request #%d comes from a fork; its pull_request run has no secrets, so nothing ran", r.ev.PullRequest)
	}
	c, stats, err := ghclient.New(ghclient.Options{APIURL: r.d.Getenv("GITHUB_API_URL"), Token: r.in.Token, Base: r.d.HTTP,
		Sleep: r.d.Sleep, Now: r.d.Now, Progress: r.logf, MaxWait: rateWait(r.d.Getenv)})
	if err != nil {
		return err
	}
	r.stats = stats
	if r.rep, err = prreport.NewReporter(c, r.repo, r.d.Bot); err != nil {
		return failure.Newf(failure.EventUnsupported, "GITHUB_REPOSITORY: %v", err)
	}
	r.rep.Progress = r.logf
	if err := r.loadManifest(); err != nil {
		r.manifestFailure(ctx, err)
		return err
	}
	if err := r.writeKubeconfig(); err != nil {
		return err
	}
	defer os.Remove(r.env["KUBECONFIG"])
	switch r.in.Command {
	case "down":
		return r.down(ctx)
	case "status":
		return r.status(ctx)
	}
	return r.up(ctx)
}

func rateWait(getenv func(string) string) time.Duration {
	if d, err := time.ParseDuration(getenv("AF_GITHUB_RATE_WAIT")); err == nil && d > 0 {
		return d
	}
	return ghclient.DefaultMaxWait
}

func (r *run) workspace() string {
	if w := r.d.Getenv("GITHUB_WORKSPACE"); w != "" {
		return w
	}
	return "."
}

func (r *run) loadManifest() error {
	path := filepath.Join(r.workspace(), r.in.Manifest)
	res, err := manifest.Load(path, nil)
	if err != nil {
		return err
	}
	r.res = res
	for _, w := range res.Warnings {
		r.gha.WithFieldsMap(map[string]string{"file": r.in.Manifest, "line": fmt.Sprint(max(w.Line, 1))}).Warningf("%s", w)
	}
	if err := res.Err(r.in.Manifest); err != nil {
		for _, p := range res.Problems {
			r.gha.WithFieldsMap(map[string]string{"file": r.in.Manifest, "line": fmt.Sprint(max(p.Line, 1))}).Errorf("%s", p)
		}
		return err
	}
	r.man = res.Manifest
	return nil
}

// writeKubeconfig puts the kubeconfig input in a private temporary file for the runtime.
func (r *run) writeKubeconfig() error {
	f, err := os.CreateTemp(r.tempDir(), "af-kubeconfig-*")
	if err != nil {
		return failure.New(failure.Internal, "writing the kubeconfig to a temporary file", err)
	}
	defer f.Close()
	if _, err := f.WriteString(r.in.Kubeconfig); err != nil {
		return failure.New(failure.Internal, "writing the kubeconfig to a temporary file", err)
	}
	r.env["KUBECONFIG"] = f.Name()
	if r.in.RegistryPassword != "" {
		r.env["AF_REGISTRY_USERNAME"], r.env["AF_REGISTRY_PASSWORD"] = r.in.RegistryUsername, r.in.RegistryPassword
	}
	return nil
}

func (r *run) tempDir() string {
	if t := r.d.Getenv("RUNNER_TEMP"); t != "" {
		if st, err := os.Stat(t); err == nil && st.IsDir() {
			return t
		}
	}
	return os.TempDir()
}

func (r *run) ref() (afruntime.Ref, error) {
	ref := afruntime.Ref{Manifest: r.man, Repository: r.repo}
	var err error
	if r.in.Environment != "" {
		ref.ID, err = envid.ForName(r.in.Environment)
		if err == nil && ref.ID != r.in.Environment {
			return ref, failure.Newf(failure.ActionInputInvalid, "input environment: %q is not an environment id (a DNS label); %q would be", r.in.Environment, ref.ID)
		}
		return ref, err
	}
	ref.ID, err = envid.ForPullRequest(r.repo, r.ev.PullRequest)
	return ref, err
}

func (r *run) runtime() (afruntime.Runtime, error) {
	if r.d.Runtime != nil {
		return r.d.Runtime(r.man, r.getenv, r.in.Context)
	}
	if r.man.Runtime.Provider != kubernetes.Name {
		return nil, failure.Newf(failure.RuntimeCannot, "the action runs the kubernetes runtime; the manifest asks for %q", r.man.Runtime.Provider)
	}
	o, err := settings.Kubernetes(r.getenv, r.in.Context, r.logf)
	if err != nil {
		return nil, err
	}
	return kubernetes.New(o), nil
}

func enabled(b *bool) bool { return b == nil || *b }

// report runs one reporting step; its failure is a warning and never the step's result.
func (r *run) report(what string, f func() error) {
	if err := f(); err != nil {
		r.out.Reported = append(r.out.Reported, what)
		r.gha.Warningf("reporting on the pull request (%s) failed: %s", what, failure.Ensure(err).Error())
	}
}

// approval decides what the pull request may run: ForkNotApproved when it may not run at all;
// otherwise the egress rules left out for want of approval (the manifest is changed to the
// base branch's egress).
func (r *run) approval(ctx context.Context) ([]string, error) {
	if r.ev.PullRequest == 0 || r.ev.Name == "workflow_dispatch" {
		return nil, nil
	}
	// The base branch's manifest decides the fork policy and the egress a pull request gets
	// without approval, never the pull request's own. Without it (a new file, an unreadable
	// one) the defaults apply: fork_policy label, and no egress at all.
	base := manifest.Egress{}
	gh := manifest.GitHub{}
	if r.ev.BaseSHA != "" {
		b, ok, err := r.rep.File(ctx, r.in.Manifest, r.ev.BaseSHA)
		switch {
		case err != nil:
			r.gha.Warningf("the base branch's %s could not be read, so no egress rule of this pull request's is applied without approval: %s", r.in.Manifest, failure.Ensure(err).Error())
		case ok:
			if res := manifest.Parse(b); res.Valid() {
				base, gh = res.Manifest.Egress, res.Manifest.GitHub
			}
		}
	}
	label := gh.Label
	if label == "" {
		label = "af-preview"
	}
	policy := gh.ForkPolicy
	if policy == "" {
		policy = "label"
	}
	approved := false
	if r.ev.Fork {
		switch policy {
		case "never":
			return nil, failure.Newf(failure.ForkNotApproved, "pull request #%d comes from a fork and github.fork_policy is never", r.ev.PullRequest)
		case "label":
			if r.ev.Name != "pull_request_target" {
				return nil, failure.Newf(failure.ForkNotApproved, "pull request #%d comes from a fork: fork_policy label runs it only under pull_request_target", r.ev.PullRequest)
			}
			if r.ev.Action == "synchronize" {
				// A new commit needs a new approval.
				if err := r.rep.RemoveLabel(ctx, r.ev.PullRequest, label); err != nil {
					return nil, err
				}
				r.logf("new commits on a fork's pull request: label %s removed; a maintainer adds it again to approve them", label)
			}
			has, err := r.rep.HasLabel(ctx, r.ev.PullRequest, label)
			if err != nil {
				return nil, err
			}
			if !has {
				return nil, failure.Newf(failure.ForkNotApproved, "pull request #%d comes from a fork and does not carry the label %s", r.ev.PullRequest, label)
			}
			approved = true
		case "always":
			approved = true
		}
	}
	wide := Widening(base, r.man.Egress)
	if len(wide) == 0 {
		return nil, nil
	}
	if !approved {
		has, err := r.rep.HasLabel(ctx, r.ev.PullRequest, label)
		if err != nil {
			r.gha.Warningf("the labels of pull request #%d could not be read, so its egress widening counts as not approved: %s", r.ev.PullRequest, failure.Ensure(err).Error())
		}
		approved = has
	}
	if approved {
		r.logf("egress widened by the pull request, approved by the label %s: %s", label, strings.Join(wide, "; "))
		return nil, nil
	}
	m := *r.man
	m.Egress = base
	r.man = &m
	r.gha.Warningf("%s", failure.Newf(failure.EgressNotApproved, "the environment runs under the base branch's egress rules; left out: %s", strings.Join(wide, "; ")).Error())
	return wide, nil
}

func (r *run) up(ctx context.Context) error {
	start := r.now()
	ref, err := r.ref()
	if err != nil {
		return err
	}
	facts := &prreport.Facts{Environment: ref.ID, Repository: r.repo, PullRequest: r.ev.PullRequest, Commit: r.ev.HeadSHA, RunURL: prreport.RunURL(r.d.Getenv), At: start}
	gh := r.man.GitHub
	hasPR := r.ev.PullRequest > 0
	leftOut, err := r.approval(ctx)
	if errors.Is(err, failure.ForkNotApproved) {
		facts.State, facts.Reason = prreport.Skipped, failure.Ensure(err).Detail+". A maintainer who has read the change adds the approval label; each new push needs it again."
		if enabled(gh.Check) {
			r.report("check run", func() error {
				id, err := r.rep.StartCheck(ctx, r.ev.HeadSHA, facts.RunURL)
				if err != nil {
					return err
				}
				return r.rep.FinishCheck(ctx, id, facts, nil)
			})
		}
		if enabled(gh.Comment) {
			r.report("comment", func() error {
				_, err := r.rep.Comment(ctx, r.ev.PullRequest, prreport.Comment(facts), true)
				return err
			})
		}
		r.summary(facts)
		return err
	}
	if err != nil {
		return err
	}
	facts.LeftOut = leftOut
	var checkID, deployID int64
	if hasPR && enabled(gh.Check) {
		r.report("check run", func() (err error) { checkID, err = r.rep.StartCheck(ctx, r.ev.HeadSHA, facts.RunURL); return err })
	}
	if hasPR && enabled(gh.Deployment) {
		r.report("deployment", func() (err error) {
			deployID, err = r.rep.Deploy(ctx, r.ev.PullRequest, r.ev.HeadSHA, facts.RunURL)
			return err
		})
	}
	res, upErr := r.bringUp(ctx, ref)
	facts.Duration = r.now().Sub(start)
	r.facts(facts, res, upErr)
	r.out.Facts = facts
	if hasPR && enabled(gh.Comment) {
		r.report("comment", func() error {
			_, err := r.rep.Comment(ctx, r.ev.PullRequest, prreport.Comment(facts), true)
			return err
		})
	}
	if checkID != 0 {
		r.report("check run", func() error { return r.rep.FinishCheck(ctx, checkID, facts, r.annotations()) })
	}
	if deployID != 0 {
		r.report("deployment status", func() error {
			if facts.State == prreport.Ready {
				return r.rep.DeploymentStatus(ctx, deployID, "success", facts.FirstURL(), facts.RunURL, "preview ready")
			}
			return r.rep.DeploymentStatus(ctx, deployID, "failure", "", facts.RunURL, facts.Headline())
		})
	}
	r.summary(facts)
	r.outputs(facts)
	return upErr
}

// bringUp publishes the images and brings the environment up: what af up does.
func (r *run) bringUp(ctx context.Context, ref afruntime.Ref) (*afruntime.Result, error) {
	r.gha.Group("af up " + ref.ID)
	defer r.gha.EndGroup()
	ref.Manifest = r.man // as the approval left it
	start := r.now()
	defer func() { r.out.Up = r.now().Sub(start) }()
	if r.in.Registry != "" {
		m := *r.man
		m.Runtime.Registry = r.in.Registry
		r.man = &m
		ref.Manifest = r.man
	}
	rt, err := r.runtime()
	if err != nil {
		return nil, err
	}
	imgs := map[string]string{}
	for k, v := range r.in.Images {
		if _, ok := r.man.Services[k]; !ok {
			return nil, failure.Newf(failure.ActionInputInvalid, "input images: the manifest has no service %s", k)
		}
		imgs[k] = v
	}
	tars := map[string]string{}
	if needsBuild(r.man, imgs) {
		d, err := settings.Docker(r.getenv, r.logf)
		if err != nil {
			return nil, err
		}
		base := filepath.Dir(filepath.Join(r.workspace(), r.in.Manifest))
		if err := images.BuildServices(ctx, d, r.man, base, imgs, tars); err != nil {
			if fe := failure.As(err); fe != nil && errors.Is(err, failure.BuildFailed) {
				var built []string
				for _, name := range manifest.StartOrder(r.man.Services) {
					if r.man.Services[name].Build != nil && imgs[name] == "" {
						built = append(built, name)
					}
				}
				return nil, fe.WithHint("Services " + strings.Join(built, ", ") + " are built from source: give each in the images input (SERVICE=REF, built by an earlier step), or let the job's Docker socket (/var/run/docker.sock, or DOCKER_HOST) reach a daemon.")
			}
			return nil, err
		}
	}
	ctx = afruntime.WithProgress(ctx, r.logf)
	res, err := rt.Up(ctx, afruntime.Spec{Ref: ref, PullRequest: r.ev.PullRequest, Images: imgs, Archives: tars, Getenv: r.getenv})
	if err == nil {
		r.blocked = r.blockedSoFar(ctx, rt, ref)
	}
	return res, err
}

// blockedSoFar reads what the environment's sidecar refused while it started, grouped by host,
// port and rule. A runtime that cannot reach the sidecar, or an identity without
// pods/portforward, leaves the comment without it and says so in the log: the environment is
// up either way.
func (r *run) blockedSoFar(ctx context.Context, rt afruntime.Runtime, ref afruntime.Ref) []prreport.BlockedHost {
	obs, ok := rt.(afruntime.Observer)
	if !ok || !rt.Capabilities().NetLog {
		return nil
	}
	link, err := obs.Sidecar(ctx, ref)
	if err != nil {
		r.gha.Warningf("the comment does not list blocked hosts: %v", err)
		return nil
	}
	defer link.Close()
	entries, _, err := (&control.Client{Addr: link.Addr}).Log(ctx, control.LogQuery{Blocked: true})
	if err != nil {
		r.gha.Warningf("the comment does not list blocked hosts: %v", err)
		return nil
	}
	at := map[prreport.BlockedHost]int{} // keyed without the count: host, port and rule
	var out []prreport.BlockedHost
	for _, e := range entries {
		k := prreport.BlockedHost{Host: e.Host, Port: e.Port, Rule: e.Rule}
		if i, ok := at[k]; ok {
			out[i].Count++
			continue
		}
		at[k] = len(out)
		k.Count = 1
		out = append(out, k)
	}
	return out
}

func needsBuild(m *manifest.Manifest, imgs map[string]string) bool {
	for name, s := range m.Services {
		if s.Build != nil && imgs[name] == "" {
			return true
		}
	}
	return false
}

func (r *run) facts(f *prreport.Facts, res *afruntime.Result, err error) {
	if res != nil {
		f.Namespace, f.Probe, f.Services, f.URLs = res.Namespace, res.Probe, res.Services, res.URLs
	}
	f.Blocked = r.blocked
	switch {
	case err == nil:
		f.State = prreport.Ready
	case errors.Is(err, failure.NotContained):
		f.State = prreport.NotContained
	default:
		f.State = prreport.Failed
	}
	if err != nil {
		rep := failure.Ensure(err).Report()
		f.Failure = &rep
	}
}

// manifestFailure reports an invalid manifest on the pull request: a failed check with each
// problem on its line, and the comment.
func (r *run) manifestFailure(ctx context.Context, err error) {
	if r.res == nil || r.ev.PullRequest == 0 || r.in.Command != "up" {
		return
	}
	rep := failure.Ensure(err).Report()
	f := &prreport.Facts{State: prreport.Failed, Repository: r.repo, PullRequest: r.ev.PullRequest, Commit: r.ev.HeadSHA,
		RunURL: prreport.RunURL(r.d.Getenv), Failure: &rep, Environment: r.in.Manifest}
	var notes []prreport.Annotation
	for _, p := range r.res.Problems {
		notes = append(notes, prreport.Annotation{Path: r.in.Manifest, Line: max(p.Line, 1), Level: "failure", Title: p.Path, Message: p.Message})
	}
	r.out.Facts = f
	r.report("check run", func() error {
		id, err := r.rep.StartCheck(ctx, r.ev.HeadSHA, f.RunURL)
		if err != nil {
			return err
		}
		return r.rep.FinishCheck(ctx, id, f, append(notes, r.annotations()...))
	})
	r.report("comment", func() error { _, err := r.rep.Comment(ctx, r.ev.PullRequest, prreport.Comment(f), true); return err })
	r.summary(f)
}

// annotations marks the manifest's warnings on their lines.
func (r *run) annotations() []prreport.Annotation {
	if r.res == nil {
		return nil
	}
	var out []prreport.Annotation
	for _, w := range r.res.Warnings {
		out = append(out, prreport.Annotation{Path: r.in.Manifest, Line: max(w.Line, 1), Level: "warning", Title: w.Path, Message: w.Message})
	}
	return out
}

func (r *run) summary(f *prreport.Facts) {
	if r.d.Getenv("GITHUB_STEP_SUMMARY") == "" {
		return
	}
	r.gha.AddStepSummary(prreport.Summary(f))
}

func (r *run) outputs(f *prreport.Facts) {
	if r.d.Getenv("GITHUB_OUTPUT") == "" {
		return
	}
	urls, _ := json.Marshal(orEmpty(f.URLs))
	r.gha.SetOutput("url", f.FirstURL())
	r.gha.SetOutput("urls", string(urls))
	r.gha.SetOutput("namespace", f.Namespace)
	r.gha.SetOutput("environment", f.Environment)
	r.gha.SetOutput("contained", fmt.Sprint(f.Probe != nil && f.Probe.Verdict == "contained"))
	routes := []any{}
	if f.Probe != nil {
		for _, a := range f.Probe.Routes {
			routes = append(routes, a)
		}
	}
	probe, _ := json.Marshal(routes)
	r.gha.SetOutput("probe", string(probe))
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// target names the environment and builds its runtime: what down and status do first.
func (r *run) target() (afruntime.Ref, afruntime.Runtime, error) {
	ref, err := r.ref()
	if err != nil {
		return ref, nil, err
	}
	rt, err := r.runtime()
	return ref, rt, err
}

func (r *run) down(ctx context.Context) error {
	ref, rt, err := r.target()
	if err != nil {
		return err
	}
	r.gha.Group("af down " + ref.ID)
	st, _ := rt.Status(ctx, ref)
	downErr := rt.Down(afruntime.WithProgress(ctx, r.logf), ref)
	r.gha.EndGroup()
	if downErr != nil {
		return downErr
	}
	why := "the workflow ran `command: down`"
	if r.ev.Name == "pull_request" || r.ev.Name == "pull_request_target" {
		if r.ev.Action == "closed" && r.ev.Merged {
			why = "the pull request was merged"
		} else if r.ev.Action == "closed" {
			why = "the pull request was closed"
		}
	}
	f := &prreport.Facts{State: prreport.Gone, Environment: ref.ID, Repository: r.repo, PullRequest: r.ev.PullRequest, Commit: r.ev.HeadSHA, At: r.now(), Reason: why}
	if st != nil {
		f.Namespace = st.Namespace
	}
	r.out.Facts = f
	if r.ev.PullRequest > 0 {
		gh := r.man.GitHub
		if enabled(gh.Comment) {
			r.report("comment", func() error { _, err := r.rep.Comment(ctx, r.ev.PullRequest, prreport.Comment(f), false); return err })
		}
		if enabled(gh.Deployment) {
			r.report("deployment status", func() error {
				_, err := r.rep.Deactivate(ctx, r.ev.PullRequest, "preview removed: "+why)
				return err
			})
		}
	}
	r.summary(f)
	if r.d.Getenv("GITHUB_OUTPUT") != "" {
		r.gha.SetOutput("environment", f.Environment)
		r.gha.SetOutput("namespace", f.Namespace)
	}
	return nil
}

func (r *run) status(ctx context.Context) error {
	ref, rt, err := r.target()
	if err != nil {
		return err
	}
	st, err := rt.Status(ctx, ref)
	if err != nil {
		return err
	}
	f := &prreport.Facts{State: prreport.Ready, Environment: ref.ID, Namespace: st.Namespace, Probe: st.Probe, Services: st.Services, Commit: r.ev.HeadSHA, URLs: map[string]string{}}
	for _, s := range st.Services {
		if s.URL != "" {
			f.URLs[s.Name] = s.URL
		}
	}
	if !st.Exists {
		f.State, f.At, f.Reason = prreport.Gone, r.now(), "it does not exist"
	}
	r.out.Facts = f
	r.summary(f)
	r.outputs(f)
	return nil
}
