package action

import (
	"os"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/github/event"
)

// Event is what the action takes from the workflow's event.
type Event struct {
	Name   string // pull_request, pull_request_target, workflow_run, workflow_dispatch
	Action string // opened, synchronize, reopened, labeled, closed, ...
	// PullRequest is the number, 0 without one (a dispatch naming an environment).
	PullRequest int
	// HeadSHA is the pull request's head commit (never GITHUB_SHA, a merge commit).
	HeadSHA string
	// DefaultBranch is the repository's default branch, as GitHub wrote it into the event: the
	// operator's policy (fork_policy, base-only fields, limits) is read there at its current
	// head, never at a base the pull request chose.
	DefaultBranch string
	// Fork says the head is another repository's.
	Fork   bool
	Labels []string
	// Merged and the closing reason, for down.
	Merged bool
	// Run is the workflow run a workflow_run event is about (the unprivileged build's), with
	// the event that started it and how it ended.
	Run *WorkflowRun
}

// WorkflowRun is the run a workflow_run event reports: for af, the unprivileged build of a
// pull request, whose artifact the deploy job takes.
type WorkflowRun struct {
	ID         int64
	Event      string // the event that started it: pull_request
	Conclusion string // success, failure, ...
	// HeadRepository is where the built code came from (a fork's full name).
	HeadRepository string
}

// ReadEvent reads the event the workflow ran for. A workflow_dispatch names no pull request:
// the caller sets it from the pr-number input.
func ReadEvent(getenv func(string) string) (Event, error) {
	ev := Event{Name: getenv("GITHUB_EVENT_NAME")}
	switch ev.Name {
	case "pull_request", "pull_request_target", "workflow_run":
	case "workflow_dispatch":
		// A maintainer's run: which pull request is the pr-number input; whether it comes from
		// a fork, and its head, are read from GitHub (action.go) and the dispatched commit must be
		// that head. The payload says the default branch.
		ev.HeadSHA = getenv("GITHUB_SHA")
		if b, err := os.ReadFile(getenv("GITHUB_EVENT_PATH")); err == nil {
			if repo, err := event.ReadRepository(b); err == nil {
				ev.DefaultBranch = repo.DefaultBranch
			}
		}
		return ev, nil
	case "":
		return ev, failure.Newf(failure.EventUnsupported, "GITHUB_EVENT_NAME is not set: af action runs inside a GitHub Actions job")
	default:
		return ev, failure.Newf(failure.EventUnsupported, "the workflow ran for %s", ev.Name)
	}
	path := getenv("GITHUB_EVENT_PATH")
	b, err := os.ReadFile(path)
	if err != nil {
		return ev, failure.New(failure.EventUnsupported, "reading the event payload (GITHUB_EVENT_PATH "+path+")", err)
	}
	if ev.Name == "workflow_run" {
		return workflowRun(ev, b)
	}
	pr, err := event.DecodePullRequest(b)
	if err != nil {
		return ev, failure.New(failure.EventUnsupported, "the "+ev.Name+" payload has no pull request", err)
	}
	ev.Action, ev.PullRequest, ev.HeadSHA, ev.DefaultBranch = pr.Action, pr.Number, pr.HeadSHA, pr.DefaultBranch
	ev.Merged, ev.Fork, ev.Labels = pr.Merged, pr.Fork(), pr.Labels
	if ev.HeadSHA == "" || ev.PullRequest < 1 {
		return ev, failure.Newf(failure.EventUnsupported, "the %s payload has no pull request number or head commit", ev.Name)
	}
	return ev, nil
}

// workflowRun reads a workflow_run event. The pull request's number is in the payload only for
// a pull request from the same repository (GitHub leaves pull_requests empty for a fork's): the
// artifact names it, and the action checks it against GitHub before it deploys anything.
func workflowRun(ev Event, b []byte) (Event, error) {
	wr, err := event.DecodeWorkflowRun(b)
	if err != nil {
		return ev, failure.New(failure.EventUnsupported, "the workflow_run payload has no run", err)
	}
	ev.Action, ev.HeadSHA, ev.DefaultBranch = wr.Action, wr.HeadSHA, wr.DefaultBranch
	ev.Run = &WorkflowRun{ID: wr.ID, Event: wr.Event, Conclusion: wr.Conclusion, HeadRepository: wr.HeadRepository}
	ev.Fork = wr.Fork()
	if len(wr.PullRequests) == 1 {
		ev.PullRequest = wr.PullRequests[0]
	}
	if ev.HeadSHA == "" {
		return ev, failure.Newf(failure.EventUnsupported, "the workflow_run payload has no head commit")
	}
	if wr.Event != "pull_request" {
		return ev, failure.Newf(failure.EventUnsupported, "the workflow run was started by %s; af deploys the artifact of a pull_request run only", wr.Event)
	}
	return ev, nil
}
