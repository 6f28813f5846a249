// Package event decodes the webhook payloads af acts on, once for every reader: a
// pull_request (or pull_request_target) payload, which the action deploys from and the App
// tears down from, and a workflow_run payload, from which the action deploys a fork's
// build. It reads what af uses and nothing else; what a payload means is the reader's.
package event

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrNoPullRequest: the payload is JSON without a pull_request object.
var ErrNoPullRequest = errors.New("no pull_request object")

// ErrNoWorkflowRun: the payload is JSON without a workflow_run object.
var ErrNoWorkflowRun = errors.New("no workflow_run object")

// PullRequest is a pull_request payload as af reads it.
type PullRequest struct {
	Action string // opened, synchronize, reopened, labeled, closed, ...
	// Number is the pull request's number (its own, else the payload's).
	Number  int
	Merged  bool
	HeadSHA string
	// HeadRepository is the head's full name; "" when that repository is gone (a deleted fork).
	HeadRepository string
	// BaseRepository is the base's full name.
	BaseRepository string
	Labels         []string
	Repository
}

// Repository is what every payload says of the repository and the App's installation.
type Repository struct {
	// FullName is the repository's OWNER/NAME; "" when the payload names none.
	FullName string
	// DefaultBranch is the repository's default branch as GitHub wrote it into the payload.
	DefaultBranch string
	// Installation is the App's installation the delivery is for; 0 in a workflow's event.
	Installation int64
}

// Fork says the head is another repository's, or one that is gone.
func (p PullRequest) Fork() bool {
	return p.HeadRepository == "" || !strings.EqualFold(p.HeadRepository, p.BaseRepository)
}

// WorkflowRun is a workflow_run payload as af reads it: the unprivileged build of a pull
// request, whose artifact the deploy job takes.
type WorkflowRun struct {
	Action     string
	ID         int64
	Event      string // the event that started the run: pull_request
	Conclusion string // success, failure, ...
	HeadSHA    string
	// HeadRepository is where the built code came from; "" when it is gone.
	HeadRepository string
	// RunRepository is the repository the run belongs to.
	RunRepository string
	// PullRequests are the numbers GitHub lists (none for a fork's run).
	PullRequests []int
	Repository
}

// Fork says the built code is another repository's, or one that is gone.
func (w WorkflowRun) Fork() bool {
	return w.HeadRepository == "" || !strings.EqualFold(w.HeadRepository, w.RunRepository)
}

type named struct {
	FullName string `json:"full_name"`
}

type repository struct {
	Repository *struct {
		FullName      string `json:"full_name"`
		DefaultBranch string `json:"default_branch"`
	} `json:"repository"`
	Installation *struct {
		ID int64 `json:"id"`
	} `json:"installation"`
}

func (r repository) read() Repository {
	var out Repository
	if r.Repository != nil {
		out.FullName, out.DefaultBranch = r.Repository.FullName, r.Repository.DefaultBranch
	}
	if r.Installation != nil {
		out.Installation = r.Installation.ID
	}
	return out
}

// ReadRepository reads what any payload says of its repository and installation.
func ReadRepository(b []byte) (Repository, error) {
	var p repository
	if err := json.Unmarshal(b, &p); err != nil {
		return Repository{}, fmt.Errorf("the payload does not have GitHub's shape: %w", err)
	}
	return p.read(), nil
}

// DecodePullRequest reads a pull_request payload. JSON that does not have GitHub's shape is
// an error, as is one without a pull_request object (ErrNoPullRequest); what else it lacks
// (a number, a head commit, a repository) the reader judges.
func DecodePullRequest(b []byte) (PullRequest, error) {
	var p struct {
		repository
		Action      string `json:"action"`
		Number      int    `json:"number"`
		PullRequest *struct {
			Number int  `json:"number"`
			Merged bool `json:"merged"`
			Head   struct {
				SHA  string `json:"sha"`
				Repo *named `json:"repo"`
			} `json:"head"`
			Base struct {
				Repo *named `json:"repo"`
			} `json:"base"`
			Labels []struct {
				Name string `json:"name"`
			} `json:"labels"`
		} `json:"pull_request"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return PullRequest{}, fmt.Errorf("the pull_request payload does not have GitHub's shape: %w", err)
	}
	out := PullRequest{Action: p.Action, Number: p.Number, Repository: p.read()}
	pr := p.PullRequest
	if pr == nil {
		return out, ErrNoPullRequest
	}
	if pr.Number != 0 {
		out.Number = pr.Number
	}
	out.Merged, out.HeadSHA = pr.Merged, pr.Head.SHA
	if pr.Head.Repo != nil {
		out.HeadRepository = pr.Head.Repo.FullName
	}
	if pr.Base.Repo != nil {
		out.BaseRepository = pr.Base.Repo.FullName
	}
	for _, l := range pr.Labels {
		out.Labels = append(out.Labels, l.Name)
	}
	return out, nil
}

// DecodeWorkflowRun reads a workflow_run payload: an error when it is not GitHub's shape or
// has no workflow_run object (ErrNoWorkflowRun).
func DecodeWorkflowRun(b []byte) (WorkflowRun, error) {
	var p struct {
		repository
		Action      string `json:"action"`
		WorkflowRun *struct {
			ID             int64  `json:"id"`
			Event          string `json:"event"`
			Conclusion     string `json:"conclusion"`
			HeadSHA        string `json:"head_sha"`
			HeadRepository *named `json:"head_repository"`
			Repository     named  `json:"repository"`
			PullRequests   []struct {
				Number int `json:"number"`
			} `json:"pull_requests"`
		} `json:"workflow_run"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return WorkflowRun{}, fmt.Errorf("the workflow_run payload does not have GitHub's shape: %w", err)
	}
	out := WorkflowRun{Action: p.Action, Repository: p.read()}
	wr := p.WorkflowRun
	if wr == nil {
		return out, ErrNoWorkflowRun
	}
	out.ID, out.Event, out.Conclusion, out.HeadSHA = wr.ID, wr.Event, wr.Conclusion, wr.HeadSHA
	if wr.HeadRepository != nil {
		out.HeadRepository = wr.HeadRepository.FullName
	}
	out.RunRepository = wr.Repository.FullName
	for _, n := range wr.PullRequests {
		out.PullRequests = append(out.PullRequests, n.Number)
	}
	return out, nil
}
