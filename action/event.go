package action

import (
	"encoding/json"
	"os"
	"strings"

	"github.com/antifailure/af/failure"
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

type payload struct {
	Action     string `json:"action"`
	Repository *struct {
		DefaultBranch string `json:"default_branch"`
	} `json:"repository"`
	WorkflowRun *struct {
		ID             int64  `json:"id"`
		Event          string `json:"event"`
		Conclusion     string `json:"conclusion"`
		HeadSHA        string `json:"head_sha"`
		HeadRepository *struct {
			FullName string `json:"full_name"`
		} `json:"head_repository"`
		Repository struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
		PullRequests []struct {
			Number int `json:"number"`
		} `json:"pull_requests"`
	} `json:"workflow_run"`
	Number      int `json:"number"`
	PullRequest *struct {
		Number int  `json:"number"`
		Merged bool `json:"merged"`
		Head   struct {
			SHA  string `json:"sha"`
			Repo *struct {
				FullName string `json:"full_name"`
			} `json:"repo"`
		} `json:"head"`
		Base struct {
			SHA  string `json:"sha"`
			Ref  string `json:"ref"`
			Repo struct {
				FullName string `json:"full_name"`
			} `json:"repo"`
		} `json:"base"`
		Labels []struct {
			Name string `json:"name"`
		} `json:"labels"`
	} `json:"pull_request"`
}

// ReadEvent reads the event the workflow ran for. dispatchPR is the pr-number input, used by
// workflow_dispatch.
func ReadEvent(getenv func(string) string, dispatchPR int) (Event, error) {
	ev := Event{Name: getenv("GITHUB_EVENT_NAME")}
	switch ev.Name {
	case "pull_request", "pull_request_target", "workflow_run":
	case "workflow_dispatch":
		// A maintainer's run: which pull request is the pr-number input; whether it comes from
		// a fork, and its head, are read from GitHub (action.go) and the dispatched commit must be
		// that head. The payload says the default branch.
		ev.PullRequest, ev.HeadSHA = dispatchPR, getenv("GITHUB_SHA")
		if b, err := os.ReadFile(getenv("GITHUB_EVENT_PATH")); err == nil {
			var p payload
			if json.Unmarshal(b, &p) == nil && p.Repository != nil {
				ev.DefaultBranch = p.Repository.DefaultBranch
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
	var p payload
	if err := json.Unmarshal(b, &p); err == nil && p.Repository != nil {
		ev.DefaultBranch = p.Repository.DefaultBranch
	}
	if ev.Name == "workflow_run" {
		return workflowRun(ev, b)
	}
	if err := json.Unmarshal(b, &p); err != nil || p.PullRequest == nil {
		if err == nil {
			err = errNoPR
		}
		return ev, failure.New(failure.EventUnsupported, "the "+ev.Name+" payload has no pull request", err)
	}
	pr := p.PullRequest
	ev.Action, ev.PullRequest, ev.HeadSHA = p.Action, pr.Number, pr.Head.SHA
	if ev.PullRequest == 0 {
		ev.PullRequest = p.Number
	}
	ev.Merged = pr.Merged
	// A head repository that is gone (deleted fork) is a fork too.
	ev.Fork = pr.Head.Repo == nil || !strings.EqualFold(pr.Head.Repo.FullName, pr.Base.Repo.FullName)
	for _, l := range pr.Labels {
		ev.Labels = append(ev.Labels, l.Name)
	}
	if ev.HeadSHA == "" || ev.PullRequest < 1 {
		return ev, failure.Newf(failure.EventUnsupported, "the %s payload has no pull request number or head commit", ev.Name)
	}
	return ev, nil
}

// workflowRun reads a workflow_run event. The pull request's number is in the payload only for
// a pull request from the same repository (GitHub leaves pull_requests empty for a fork's): the
// artifact names it, and the action checks it against GitHub before it deploys anything.
func workflowRun(ev Event, b []byte) (Event, error) {
	var p payload
	if err := json.Unmarshal(b, &p); err != nil || p.WorkflowRun == nil {
		if err == nil {
			err = eventError("no workflow_run object")
		}
		return ev, failure.New(failure.EventUnsupported, "the workflow_run payload has no run", err)
	}
	wr := p.WorkflowRun
	ev.Action, ev.HeadSHA = p.Action, wr.HeadSHA
	ev.Run = &WorkflowRun{ID: wr.ID, Event: wr.Event, Conclusion: wr.Conclusion}
	if wr.HeadRepository != nil {
		ev.Run.HeadRepository = wr.HeadRepository.FullName
	}
	ev.Fork = wr.HeadRepository == nil || !strings.EqualFold(wr.HeadRepository.FullName, wr.Repository.FullName)
	if len(wr.PullRequests) == 1 {
		ev.PullRequest = wr.PullRequests[0].Number
	}
	if ev.HeadSHA == "" {
		return ev, failure.Newf(failure.EventUnsupported, "the workflow_run payload has no head commit")
	}
	if wr.Event != "pull_request" {
		return ev, failure.Newf(failure.EventUnsupported, "the workflow run was started by %s; af deploys the artifact of a pull_request run only", wr.Event)
	}
	return ev, nil
}

type eventError string

func (e eventError) Error() string { return string(e) }

const errNoPR = eventError("no pull_request object")
