package action

// What a run tells the pull request: a check run, a deployment and its status, and the one
// sticky comment, each as the manifest's github block enables it; then the step summary and the
// step's outputs. A reporting step that fails is a warning, never the step's result.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/github/report"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/sidecar/control"
)

// reportBudget is how long the reports of a run that timed out or was cancelled may take.
const reportBudget = 30 * time.Second

// afterwards is a context for what must still be done after ctx ended (its values kept, its
// cancellation and deadline not), with reportBudget to do it in.
func afterwards(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), reportBudget)
}

// prReport is one run's report on its pull request.
type prReport struct {
	r        *run
	gh       manifest.GitHub
	checkID  int64
	deployID int64
}

func (r *run) prReport() *prReport {
	p := &prReport{r: r}
	switch {
	case r.man != nil:
		p.gh = r.man.GitHub
	case r.base != nil: // a fork not admitted: the operator's settings, none of the pull request's
		p.gh = r.base.GitHub
	}
	return p
}

func enabled(b *bool) bool { return b == nil || *b }

// try runs one reporting step; its failure is a warning and never the step's result.
func (p *prReport) try(what string, f func() error) {
	if err := f(); err != nil {
		p.r.out.Reported = append(p.r.out.Reported, what)
		p.r.gha.Warningf("reporting on the pull request (%s) failed: %s", what, failure.Ensure(err).Error())
	}
}

func (p *prReport) comment(ctx context.Context, f *report.Facts) {
	if enabled(p.gh.Comment) {
		p.try("comment", func() error { _, err := p.r.rep.Comment(ctx, f.PullRequest, report.Comment(f), true); return err })
	}
}

// check writes a finished check run at once, for a run that never started one.
func (p *prReport) check(ctx context.Context, f *report.Facts, notes []report.Annotation) {
	p.try("check run", func() error {
		id, err := p.r.rep.StartCheck(ctx, f.Commit, f.RunURL)
		if err != nil {
			return err
		}
		return p.r.rep.FinishCheck(ctx, id, f, notes)
	})
}

// skipped reports a pull request that may not run: a finished check run and the comment.
func (p *prReport) skipped(ctx context.Context, f *report.Facts) {
	if enabled(p.gh.Check) {
		p.check(ctx, f, nil)
	}
	p.comment(ctx, f)
}

// started opens the check run and the deployment while the environment comes up.
func (p *prReport) started(ctx context.Context, f *report.Facts) {
	if f.PullRequest == 0 {
		return
	}
	if enabled(p.gh.Check) {
		p.try("check run", func() (err error) { p.checkID, err = p.r.rep.StartCheck(ctx, f.Commit, f.RunURL); return err })
	}
	if enabled(p.gh.Deployment) {
		p.try("deployment", func() (err error) {
			p.deployID, err = p.r.rep.Deploy(ctx, f.PullRequest, f.Commit, f.RunURL, p.r.binding)
			return err
		})
	}
}

// finished writes the comment and finishes the check run and the deployment started.
func (p *prReport) finished(ctx context.Context, f *report.Facts) {
	// An environment removed while it came up (the pull request closed): the comment says so
	// already, in the remover's words; the check run is cancelled, the deployment inactive.
	if f.PullRequest > 0 && !f.Removed() {
		p.comment(ctx, f)
	}
	if p.checkID != 0 {
		p.try("check run", func() error { return p.r.rep.FinishCheck(ctx, p.checkID, f, p.r.annotations()) })
	}
	if p.deployID != 0 {
		p.try("deployment status", func() error {
			if f.State == report.Ready {
				return p.r.rep.DeploymentStatus(ctx, p.deployID, "success", f.FirstURL(), f.RunURL, "preview ready")
			}
			if f.Removed() {
				return p.r.rep.DeploymentStatus(ctx, p.deployID, "inactive", "", f.RunURL, "removed while it came up")
			}
			return p.r.rep.DeploymentStatus(ctx, p.deployID, "failure", "", f.RunURL, f.Headline())
		})
	}
}

// gone tells the pull request its environment was removed: the teardown report the App sends
// too.
func (p *prReport) gone(ctx context.Context, f *report.Facts) {
	if f.PullRequest == 0 {
		return
	}
	p.try("teardown report", func() error {
		_, err := p.r.rep.Gone(ctx, f, report.GoneParts{Comment: enabled(p.gh.Comment), Deployment: enabled(p.gh.Deployment)})
		return err
	})
}

// invalid reports an invalid manifest on the pull request: a failed check with each problem on
// its line, and the comment.
func (p *prReport) invalid(ctx context.Context, err error) {
	r := p.r
	if r.res == nil || r.ev.PullRequest == 0 || r.in.Command != "up" {
		return
	}
	rep := failure.Ensure(err).Report()
	f := &report.Facts{State: report.Failed, Repository: r.repo, PullRequest: r.ev.PullRequest, Commit: r.ev.HeadSHA,
		RunURL: report.RunURL(r.d.Getenv), Failure: &rep, Environment: r.in.Manifest}
	var notes []report.Annotation
	for _, pr := range r.res.Problems {
		notes = append(notes, report.Annotation{Path: r.in.Manifest, Line: max(pr.Line, 1), Level: "failure", Title: pr.Path, Message: pr.Message})
	}
	r.out.Facts = f
	p.check(ctx, f, append(notes, r.annotations()...))
	p.comment(ctx, f)
	r.summary(f)
}

// finish reports the end of an up: what the sidecar refused while the environment started
// (read whether it came up or not: when it failed, what was refused is often why), the facts,
// the check run and deployment, the comment, the step summary and the outputs.
func (r *run) finish(ctx context.Context, pr *prReport, f *report.Facts, rt afruntime.Runtime, ref afruntime.Ref, res *afruntime.Result, err error) {
	if rt != nil {
		r.blocked = r.blockedSoFar(ctx, rt, ref, err == nil)
	}
	if res != nil && res.Environment != "" {
		f.Environment = res.Environment
	}
	r.facts(f, res, err)
	r.out.Facts = f
	pr.finished(ctx, f)
	r.summary(f)
	r.outputs(f)
}

func (r *run) facts(f *report.Facts, res *afruntime.Result, err error) {
	if res != nil {
		f.Namespace, f.Probe, f.Services, f.URLs = res.Namespace, res.Probe, res.Services, res.URLs
	}
	f.Blocked = r.blocked
	switch {
	case err == nil:
		f.State = report.Ready
	case errors.Is(err, failure.NotContained):
		f.State = report.NotContained
	default:
		f.State = report.Failed
	}
	if err != nil {
		rep := failure.Ensure(err).Report()
		f.Failure = &rep
	}
}

// annotations marks the manifest's warnings on their lines.
func (r *run) annotations() []report.Annotation {
	if r.res == nil {
		return nil
	}
	var out []report.Annotation
	for _, w := range r.res.Warnings {
		out = append(out, report.Annotation{Path: r.in.Manifest, Line: max(w.Line, 1), Level: "warning", Title: w.Path, Message: w.Message})
	}
	return out
}

// blockedSoFar reads what the environment's sidecar refused while it started, grouped by host,
// port and rule, whether the environment came up or not (when it failed, what was refused is
// often why). A runtime that cannot reach the sidecar, or an identity without
// pods/portforward, leaves the comment without it and says so in the log (a warning when the
// environment is up; after a failure the sidecar may never have started).
func (r *run) blockedSoFar(ctx context.Context, rt afruntime.Runtime, ref afruntime.Ref, up bool) []report.BlockedHost {
	obs := rt.Observer()
	if obs == nil || !rt.Capabilities().NetLog {
		return nil
	}
	unread := func(err error) []report.BlockedHost {
		if up {
			r.gha.Warningf("the comment does not list blocked hosts: %v", err)
		} else {
			r.logf("the comment does not list blocked hosts: %v", err)
		}
		return nil
	}
	link, err := obs.Sidecar(ctx, ref)
	if err != nil {
		return unread(err)
	}
	defer link.Close()
	entries, _, err := (&control.Client{Addr: link.Addr}).Log(ctx, control.LogQuery{Blocked: true})
	if err != nil {
		return unread(err)
	}
	at := map[report.BlockedHost]int{} // keyed without the count: host, port and rule
	var out []report.BlockedHost
	for _, e := range entries {
		k := report.BlockedHost{Host: e.Host, Port: e.Port, Rule: e.Rule}
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

func (r *run) summary(f *report.Facts) {
	if r.d.Getenv("GITHUB_STEP_SUMMARY") == "" {
		return
	}
	r.gha.AddStepSummary(report.Summary(f))
}

func (r *run) outputs(f *report.Facts) {
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
