package event_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/antifailure/af/github/event"
	"github.com/antifailure/af/github/githubtest"
)

var head = strings.Repeat("c", 40)

// Every payload is GitHub's own example, edited and checked against @octokit/openapi-webhooks.
func TestDecodePullRequest(t *testing.T) {
	withInstallation := func(b []byte) []byte {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		m["installation"] = map[string]any{"id": 42, "node_id": "MDIz"}
		return githubtest.ValidateEvent(t, "pull_request", "closed", m)
	}
	deletedFork := func(b []byte) []byte {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		m["pull_request"].(map[string]any)["head"].(map[string]any)["repo"] = nil
		return b2(t, m)
	}
	cases := []struct {
		name    string
		body    []byte
		want    event.PullRequest
		wantErr error
	}{
		{"a branch's, labelled", githubtest.PullRequestEvent(t, "opened", "acme/shop", 7, head, false, "preview", "db"),
			event.PullRequest{Action: "opened", Number: 7, HeadSHA: head, HeadRepository: "acme/shop", BaseRepository: "acme/shop",
				Labels: []string{"preview", "db"}, Repository: event.Repository{FullName: "acme/shop", DefaultBranch: "main", Installation: 1}}, nil},
		{"a fork's", githubtest.PullRequestEvent(t, "synchronize", "acme/shop", 8, head, true),
			event.PullRequest{Action: "synchronize", Number: 8, HeadSHA: head, HeadRepository: "someone/shop", BaseRepository: "acme/shop",
				Repository: event.Repository{FullName: "acme/shop", DefaultBranch: "main", Installation: 1}}, nil},
		{"closed, to the App", withInstallation(githubtest.PullRequestEvent(t, "closed", "acme/shop", 9, head, false)),
			event.PullRequest{Action: "closed", Number: 9, HeadSHA: head, HeadRepository: "acme/shop", BaseRepository: "acme/shop",
				Repository: event.Repository{FullName: "acme/shop", DefaultBranch: "main", Installation: 42}}, nil},
		{"a deleted fork's", deletedFork(githubtest.PullRequestEvent(t, "closed", "acme/shop", 10, head, true)),
			event.PullRequest{Action: "closed", Number: 10, HeadSHA: head, BaseRepository: "acme/shop",
				Repository: event.Repository{FullName: "acme/shop", DefaultBranch: "main", Installation: 1}}, nil},
		{"no pull request", []byte(`{"action":"closed","number":3,"repository":{"full_name":"acme/shop"}}`),
			event.PullRequest{Action: "closed", Number: 3, Repository: event.Repository{FullName: "acme/shop"}}, event.ErrNoPullRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := event.DecodePullRequest(tc.body)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if got.Labels == nil {
				got.Labels = tc.want.Labels[:0:0]
			}
			if tc.want.Labels == nil {
				tc.want.Labels = got.Labels[:0:0]
			}
			if !equal(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	if _, err := event.DecodePullRequest([]byte(`{"number":"seven","pull_request":{}}`)); err == nil || !strings.Contains(err.Error(), "GitHub's shape") {
		t.Errorf("wrong types: %v", err)
	}
	for body, fork := range map[string]bool{"a branch's": false, "a fork's": true, "a deleted fork's": true} {
		for _, tc := range cases {
			if tc.name == body {
				got, _ := event.DecodePullRequest(tc.body)
				if got.Fork() != fork {
					t.Errorf("%s: Fork() = %v", body, got.Fork())
				}
			}
		}
	}
}

func equal(a, b event.PullRequest) bool {
	return slices.Equal(a.Labels, b.Labels) && a.Action == b.Action && a.Number == b.Number && a.Merged == b.Merged &&
		a.HeadSHA == b.HeadSHA && a.HeadRepository == b.HeadRepository && a.BaseRepository == b.BaseRepository && a.Repository == b.Repository
}

func b2(t *testing.T, m map[string]any) []byte {
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeWorkflowRun(t *testing.T) {
	branch, err := event.DecodeWorkflowRun(githubtest.WorkflowRunEvent(t, "acme/shop", 77, 7, head, "acme/shop", "success"))
	if err != nil {
		t.Fatal(err)
	}
	if branch.ID != 77 || branch.Event != "pull_request" || branch.Conclusion != "success" || branch.HeadSHA != head ||
		!slices.Equal(branch.PullRequests, []int{7}) || branch.Fork() || branch.DefaultBranch != "main" || branch.FullName != "acme/shop" {
		t.Errorf("a branch's run: %+v", branch)
	}
	fork, err := event.DecodeWorkflowRun(githubtest.WorkflowRunEvent(t, "acme/shop", 78, 8, head, "someone/shop", "failure"))
	if err != nil {
		t.Fatal(err)
	}
	if !fork.Fork() || len(fork.PullRequests) != 0 || fork.HeadRepository != "someone/shop" || fork.Conclusion != "failure" {
		t.Errorf("a fork's run: %+v", fork)
	}
	if _, err := event.DecodeWorkflowRun([]byte(`{"action":"completed"}`)); !errors.Is(err, event.ErrNoWorkflowRun) {
		t.Errorf("no run: %v", err)
	}
}
