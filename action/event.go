package action

import (
	"encoding/json"
	"os"
	"strings"

	"github.com/antifailure/af/failure"
)

// Event is what the action takes from the workflow's event.
type Event struct {
	Name   string // pull_request, pull_request_target, workflow_dispatch
	Action string // opened, synchronize, reopened, labeled, closed, ...
	// PullRequest is the number, 0 without one (a dispatch naming an environment).
	PullRequest int
	// HeadSHA is the pull request's head commit (never GITHUB_SHA, a merge commit).
	HeadSHA string
	BaseSHA string
	BaseRef string
	// Fork says the head is another repository's.
	Fork   bool
	Labels []string
	// Merged and the closing reason, for down.
	Merged bool
}

type payload struct {
	Action      string `json:"action"`
	Number      int    `json:"number"`
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
	case "pull_request", "pull_request_target":
	case "workflow_dispatch":
		ev.PullRequest, ev.HeadSHA, ev.BaseRef = dispatchPR, getenv("GITHUB_SHA"), strings.TrimPrefix(getenv("GITHUB_REF"), "refs/heads/")
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
	ev.BaseSHA, ev.BaseRef, ev.Merged = pr.Base.SHA, pr.Base.Ref, pr.Merged
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

type eventError string

func (e eventError) Error() string { return string(e) }

const errNoPR = eventError("no pull_request object")
