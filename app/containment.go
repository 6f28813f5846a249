package app

// Containment as the reaper's sweep sees it: each environment's watch read, every one not
// contained logged, and a pull request told (a check run) when its environment is seen
// escaped, and again when it is contained after that. Removing environments is reaper.go's.

import (
	"context"
	"log/slog"
	"slices"

	"github.com/antifailure/af/gate"
	afruntime "github.com/antifailure/af/runtime"
)

// ContainmentReporter tells a pull request that its environment's containment changed.
type ContainmentReporter interface {
	ContainmentChanged(ctx context.Context, repository string, pullRequest int, w EnvWatch) error
}

// readWatches reads each environment's watch into s and logs every one that is not contained:
// an error when a route got out, a warning when nothing can say (stale, stopped, absent, no
// answer). A watch that cannot be read is a warning too, with its error.
func (r *Reaper) readWatches(ctx context.Context, s *Sweep, envs []afruntime.Environment, log *slog.Logger) {
	for _, e := range envs {
		if ctx.Err() != nil {
			return
		}
		ew := EnvWatch{Namespace: e.Namespace, Repository: e.Repository}
		w, err := r.Cluster.Watch(ctx, afruntime.Ref{ID: e.ID, Namespace: e.Namespace, Repository: e.Repository})
		switch {
		case err != nil:
			ew.State, ew.Detail = "unread", err.Error()
		default:
			ew.State, ew.Detail = w.State, w.Detail
		}
		s.Watches = append(s.Watches, ew)
		r.tell(ctx, e, ew, log)
		args := []any{"delivery", "reaper", "namespace", e.Namespace, "repository", e.Repository, "pull_request", e.PullRequest, "state", ew.State, "detail", ew.Detail}
		switch ew.State {
		case gate.Contained:
		case gate.Escape:
			log.Error("an environment is no longer contained", args...)
		default:
			log.Warn("an environment's containment is not known", args...)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for ns := range r.told { // environments gone: forget what they were told
		if !slices.ContainsFunc(envs, func(e afruntime.Environment) bool { return e.Namespace == ns }) {
			delete(r.told, ns)
		}
	}
}

// tell passes a change of an environment's containment to Report: escaped, and contained
// again after an escape it told. Other states are in the log and the metrics only.
func (r *Reaper) tell(ctx context.Context, e afruntime.Environment, ew EnvWatch, log *slog.Logger) {
	if r.Report == nil || r.DryRun || e.PullRequest == 0 || e.Repository == "" {
		return
	}
	r.mu.Lock()
	if r.told == nil {
		r.told = map[string]string{}
	}
	last := r.told[e.Namespace]
	r.mu.Unlock()
	if !(ew.State == gate.Escape && last != gate.Escape || ew.State == gate.Contained && last == gate.Escape) {
		return
	}
	if err := r.Report.ContainmentChanged(ctx, e.Repository, e.PullRequest, ew); err != nil {
		log.Warn("could not tell the pull request its environment's containment changed; the next sweep tries again",
			"delivery", "reaper", "namespace", e.Namespace, "repository", e.Repository, "pull_request", e.PullRequest, "state", ew.State, "error", err.Error())
		return
	}
	r.mu.Lock()
	r.told[e.Namespace] = ew.State
	r.mu.Unlock()
}

// ContainmentCheck is the GitHub side's ContainmentReporter: a completed check run, "af
// containment", on the pull request's head commit (nothing when it is no longer open).
type ContainmentCheck struct{ GitHub Reporters }

// ContainmentChanged writes the check run.
func (c ContainmentCheck) ContainmentChanged(ctx context.Context, repository string, n int, w EnvWatch) error {
	rep, err := c.GitHub.Reporter(ctx, repository, 0)
	if err != nil {
		return err
	}
	pull, err := rep.PullRequest(ctx, n)
	if err != nil || !pull.Open {
		return err
	}
	title := "Containment broken after the start: " + w.Namespace
	if w.State == gate.Contained {
		title = "Contained again: " + w.Namespace
	}
	_, err = rep.ContainmentCheck(ctx, pull.HeadSHA, w.State == gate.Contained, title, w.Detail)
	return err
}
