package action

// The action's main flow, top to bottom: Run reads the inputs and the event, skips a fork's
// unprivileged run, connects to GitHub, loads the manifest and hands the job to up, down or
// status. Each of those reads as the steps it takes; the steps live in files named for them:
// approval.go (what a pull request may run), build.go (its images), report.go (what the pull
// request is told), setup.go (the manifest, the kubeconfig and the runtime).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sethvargo/go-githubactions"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/github/api"
	"github.com/antifailure/af/github/report"
	"github.com/antifailure/af/github/rest"
	"github.com/antifailure/af/manifest"
	"github.com/antifailure/af/preview"
	afruntime "github.com/antifailure/af/runtime"
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
	// Bot is the login the token writes as (default api.ActionsBot).
	Bot string
	// Sleep replaces waiting out rate limits (tests).
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Outcome is what a run did, for tests and for the measured overhead.
type Outcome struct {
	Exit     int
	Facts    *report.Facts
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
	rep   *report.Reporter
	stats *api.Stats
	man   *manifest.Manifest
	res   *manifest.Result
	env   map[string]string
	out   Outcome
	// base is the base branch's manifest (nil: none, or unreadable); ignored, what of the pull
	// request's manifest the trust rules left out (package trust).
	base    *manifest.Manifest
	ignored []string
	// leftOut is the pull request's egress widening that was not approved.
	leftOut []string
	// approved says the operator's policy let a fork's pull request run (admit); approval is
	// the maintainer's comment that did, on the fork path.
	approved bool
	approval rest.Approval
	// binding is what the approval deploys (the fork path): recorded on the deployment.
	binding *rest.Binding
	// tars are the services' images the build run's artifact holds.
	tars map[string]string
	// blocked is what the sidecar refused while the environment started (its migrations and
	// services' first calls), for the comment.
	blocked []report.BlockedHost
}

// Run runs the action and returns its outcome; Outcome.Exit is the step's exit status.
func Run(ctx context.Context, d Deps) Outcome {
	if d.Out == nil {
		d.Out = os.Stdout
	}
	// The runtime reports progress from several goroutines at once; every write is whole.
	d.Out = &lockedWriter{w: d.Out}
	if d.Bot == "" {
		d.Bot = api.ActionsBot
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

// main is the run, each file of the package passed once: the event (event.go), the inputs
// (inputs.go), GitHub and the kubeconfig (setup.go), a fork's build (artifact.go), the
// operator's policy and the admission (approval.go), the run's manifest (trust.go), then the
// command: up, down or status (this file), which name the environment (target.go) and report
// (report.go).
func (r *run) main(ctx context.Context) error {
	ev, evErr := ReadEvent(r.d.Getenv)
	r.mask()
	// A fork's pull_request run has a read-only token and no secrets: it says so where it can be
	// read and touches nothing, before any input (the kubeconfig among them) is required.
	if evErr == nil && ev.Name == "pull_request" && ev.Fork && r.gha.GetInput("command") != "status" && r.gha.GetInput("command") != "build" {
		f := &report.Facts{State: report.Skipped, PullRequest: ev.PullRequest, Commit: ev.HeadSHA,
			Reason: "This pull request comes from a fork, and its `pull_request` run has a read-only token and no secrets, so nothing was deployed by it. A repository that previews forks builds them with `command: build` here and deploys the build from a `workflow_run` workflow once a maintainer comments `/af approve <sha>` (docs/github.md)."}
		r.summary(f)
		return failure.Newf(failure.ForkNotApproved, "pull request #%d comes from a fork; its pull_request run has no secrets, so nothing ran", ev.PullRequest)
	}
	var err error
	if r.in, err = ReadInputs(r.gha.GetInput); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, r.in.Timeout)
	defer cancel()
	if evErr != nil {
		return evErr
	}
	if r.ev = ev; ev.Name == "workflow_dispatch" {
		r.ev.PullRequest = r.in.PRNumber // which pull request a dispatch is for is its input
	}
	r.repo = r.d.Getenv("GITHUB_REPOSITORY")
	if r.ev.Name == "workflow_dispatch" && r.ev.PullRequest == 0 && r.in.Environment == "" {
		return failure.Newf(failure.ActionInputInvalid, "input pr-number: workflow_dispatch needs pr-number or environment to name the environment")
	}
	if r.in.Command == "build" {
		return r.buildArtifact(ctx)
	}
	if err := r.connect(); err != nil {
		return err
	}
	if err := r.writeKubeconfig(); err != nil {
		return err
	}
	defer os.Remove(r.env["KUBECONFIG"])
	if r.ev.Name == "workflow_dispatch" && r.ev.PullRequest > 0 && r.in.Command == "up" {
		if err := r.dispatched(ctx); err != nil {
			return err
		}
	}
	if r.fromArtifact() {
		if r.tars, err = r.deployable(ctx); err != nil {
			if errors.Is(err, failure.ForkNotApproved) {
				r.summary(&report.Facts{State: report.Skipped, PullRequest: r.ev.PullRequest, Commit: r.ev.HeadSHA, Reason: failure.Ensure(err).Detail + "."})
			}
			return err
		}
	}
	if r.fromPullRequest() {
		// The operator's policy first, from the default branch; a fork is admitted by it, or
		// not, before any file of the pull request is read: an unapproved fork is told how to
		// be approved, and nothing quotes what it wrote.
		r.base = r.readPolicy(ctx)
		if r.in.Command == "up" {
			err := r.admit(ctx)
			if err == nil && r.fromArtifact() {
				err = r.bind(ctx)
			}
			if err != nil {
				if errors.Is(err, failure.ForkNotApproved) {
					r.notAdmitted(ctx, err)
				}
				return err
			}
		}
	}
	if err := r.manifest(ctx); err != nil {
		r.prReport().invalid(ctx, err)
		return err
	}
	switch r.in.Command {
	case "down":
		return r.down(ctx)
	case "status":
		return r.status(ctx)
	}
	return r.up(ctx)
}

// up brings the pull request's environment up and reports it: the environment named and its
// runtime made (target.go), the check run and deployment started (report.go), the images built
// and the environment brought up (bringUp: build.go, package preview, the runtime), then every
// report finished (report.go).
func (r *run) up(ctx context.Context) error {
	start := r.now()
	ref, rt, err := r.target(ctx)
	if ref.ID == "" {
		return err // nothing named: nothing to report on
	}
	facts := &report.Facts{Environment: ref.ID, Repository: r.repo, PullRequest: r.ev.PullRequest, Commit: r.ev.HeadSHA, RunURL: report.RunURL(r.d.Getenv), At: start}
	facts.LeftOut, facts.Ignored = r.leftOut, r.ignored
	pr := r.prReport()
	pr.started(ctx, facts)
	var res *afruntime.Result
	if err == nil {
		res, ref, err = r.bringUp(ctx, rt, ref)
	}
	// A run that timed out or was cancelled still finishes its reports, on a context of their own.
	ctx, cancel := afterwards(ctx)
	defer cancel()
	facts.Duration = r.now().Sub(start)
	r.finish(ctx, pr, facts, rt, ref, res, err)
	return err
}

// dispatched reads the pull request a dispatch names from GitHub: open, where its head lives
// (a fork's is refused by admit), and its head, which must be the commit the dispatch ran on
// (the workspace's): what is deployed and reported is that commit.
func (r *run) dispatched(ctx context.Context) error {
	pull, err := r.rep.PullRequest(ctx, r.ev.PullRequest)
	if err != nil {
		return err
	}
	if !pull.Open {
		return failure.Newf(failure.ActionInputInvalid, "input pr-number: pull request #%d is closed: nothing is deployed", r.ev.PullRequest)
	}
	r.ev.Fork = !strings.EqualFold(pull.HeadRepository, r.repo)
	if !r.ev.Fork && pull.HeadSHA != r.ev.HeadSHA {
		return failure.Newf(failure.ActionInputInvalid, "input pr-number: the dispatch ran on %s, but pull request #%d's head is %s: dispatch the workflow on the pull request's branch (its head), so that what is deployed is the pull request", r.ev.HeadSHA, r.ev.PullRequest, pull.HeadSHA)
	}
	r.ev.HeadSHA = pull.HeadSHA
	return nil
}

// notAdmitted tells the pull request that it was not admitted and how to be: a neutral check
// run, the comment and the step summary, from the event and the policy alone.
func (r *run) notAdmitted(ctx context.Context, err error) {
	facts := &report.Facts{State: report.Skipped, Repository: r.repo, PullRequest: r.ev.PullRequest, Commit: r.ev.HeadSHA, RunURL: report.RunURL(r.d.Getenv), At: r.now(),
		Reason: failure.Ensure(err).Detail + "."}
	if ref, rerr := r.ref(); rerr == nil {
		facts.Environment = ref.ID
	}
	if r.ev.Name == "pull_request_target" && r.policy().ForkPolicy == "label" {
		facts.Reason += " A maintainer who has read the change adds the approval label; each new push needs it again."
	}
	if errors.Is(err, errRebuilt) {
		// The approved build may be up: the comment keeps saying so; only this build's check
		// run and the summary say it was not deployed.
		if enabled(r.policy().Check) {
			r.prReport().check(ctx, facts, nil)
		}
	} else {
		r.prReport().skipped(ctx, facts)
	}
	r.summary(facts)
}

// bringUp publishes the images and brings the environment up (preview.Up): what af up does.
// It returns the environment as brought up (its id may carry the owner).
func (r *run) bringUp(ctx context.Context, rt afruntime.Runtime, ref afruntime.Ref) (*afruntime.Result, afruntime.Ref, error) {
	r.gha.Group("af up " + ref.ID)
	defer r.gha.EndGroup()
	start := r.now()
	defer func() { r.out.Up = r.now().Sub(start) }()
	imgs, tars, err := r.images(ctx)
	if err != nil {
		return nil, ref, err
	}
	spec := afruntime.Spec{Ref: ref, PullRequest: r.ev.PullRequest, Images: imgs, Archives: tars, Getenv: r.secretEnv, Holder: r.holder()}
	res, spec, err := preview.Up(afruntime.WithProgress(ctx, r.logf), rt, spec, r.logf)
	return res, spec.Ref, err
}

// holder names this run to another af up of the same environment, which waits for it: the
// workflow run (its address when known) and the commit.
func (r *run) holder() string {
	who := "workflow run " + r.d.Getenv("GITHUB_RUN_ID")
	if u := report.RunURL(r.d.Getenv); u != "" {
		who = u
	}
	if r.ev.HeadSHA != "" {
		who += " (commit " + r.ev.HeadSHA[:min(7, len(r.ev.HeadSHA))] + ")"
	}
	return who
}

// down removes the environment and tells the pull request it is gone.
func (r *run) down(ctx context.Context) error {
	ref, rt, err := r.target(ctx)
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
	why := report.ReasonCommand
	if (r.ev.Name == "pull_request" || r.ev.Name == "pull_request_target") && r.ev.Action == "closed" {
		why = report.ClosedReason(r.ev.Merged)
	}
	f := &report.Facts{State: report.Gone, Environment: ref.ID, Repository: r.repo, PullRequest: r.ev.PullRequest, Commit: r.ev.HeadSHA, At: r.now(), Reason: why}
	if st != nil {
		f.Namespace = st.Namespace
	}
	r.out.Facts = f
	r.prReport().gone(ctx, f)
	r.summary(f)
	if r.d.Getenv("GITHUB_OUTPUT") != "" {
		r.gha.SetOutput("environment", f.Environment)
		r.gha.SetOutput("namespace", f.Namespace)
	}
	return nil
}

func (r *run) status(ctx context.Context) error {
	ref, rt, err := r.target(ctx)
	if err != nil {
		return err
	}
	st, err := rt.Status(ctx, ref)
	if err != nil {
		return err
	}
	f := &report.Facts{State: report.Ready, Environment: ref.ID, Namespace: st.Namespace, Probe: st.Probe, Services: st.Services, Commit: r.ev.HeadSHA, URLs: map[string]string{}}
	for _, s := range st.Services {
		if s.URL != "" {
			f.URLs[s.Name] = s.URL
		}
	}
	if !st.Exists {
		f.State, f.At, f.Reason = report.Gone, r.now(), "it does not exist"
	}
	r.out.Facts = f
	r.summary(f)
	r.outputs(f)
	return nil
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
