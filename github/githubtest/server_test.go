package githubtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/antifailure/af/github/githubtest"
)

func TestCommentsPageAndEdit(t *testing.T) {
	s := githubtest.New(t, "tok")
	var slept []time.Duration
	c := s.Client(t, "tok", &slept)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		s.AddComment(7, "someone", "hello")
	}
	mine, _, err := c.Issues.CreateComment(ctx, "acme", "shop", 7, &github.IssueComment{Body: github.String("<!-- af -->first")})
	if err != nil {
		t.Fatal(err)
	}
	if mine.GetUser().GetLogin() != githubtest.BotLogin || mine.GetUser().GetType() != "Bot" {
		t.Fatalf("author %q (%s), want %s", mine.GetUser().GetLogin(), mine.GetUser().GetType(), githubtest.BotLogin)
	}
	var seen []int64
	opt := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 2}}
	pages := 0
	for {
		list, resp, err := c.Issues.ListComments(ctx, "acme", "shop", 7, opt)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, x := range list {
			seen = append(seen, x.GetID())
		}
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	if len(seen) != 6 || pages != 3 {
		t.Fatalf("listed %d comments in %d pages, want 6 in 3", len(seen), pages)
	}
	if _, _, err := c.Issues.EditComment(ctx, "acme", "shop", mine.GetID(), &github.IssueComment{Body: github.String("<!-- af -->second")}); err != nil {
		t.Fatal(err)
	}
	got := s.Comments(7)
	if got[5].Body != "<!-- af -->second" || len(got) != 6 {
		t.Fatalf("comments after the edit: %+v", got)
	}
	if _, _, err := s.Client(t, "wrong", &slept).Issues.CreateComment(ctx, "acme", "shop", 7, &github.IssueComment{Body: github.String("x")}); err == nil {
		t.Fatal("a comment with an unknown token was accepted")
	}
}

// The stand-in refuses what GitHub's description refuses, and what it cannot express.
func TestRefusesWhatGitHubRefuses(t *testing.T) {
	s := githubtest.New(t, "tok")
	var slept []time.Duration
	c := s.Client(t, "tok", &slept)
	ctx := context.Background()
	many := make([]*github.CheckRunAnnotation, 51)
	for i := range many {
		many[i] = &github.CheckRunAnnotation{Path: github.String("af.yaml"), StartLine: github.Int(1), EndLine: github.Int(1), AnnotationLevel: github.String("failure"), Message: github.String("x")}
	}
	cases := []struct {
		name string
		opt  github.CreateCheckRunOptions
		why  string
	}{
		{"a conclusion GitHub does not know", github.CreateCheckRunOptions{Name: "af preview", HeadSHA: strings.Repeat("a", 40), Conclusion: github.String("great")}, "conclusion"},
		{"an empty head_sha", github.CreateCheckRunOptions{Name: "af preview"}, "head_sha is empty"},
		{"51 annotations", github.CreateCheckRunOptions{Name: "af preview", HeadSHA: strings.Repeat("a", 40), Output: &github.CheckRunOutput{Title: github.String("t"), Summary: github.String("s"), Annotations: many}}, "maximum number of items is 50"},
		{"a relative details_url", github.CreateCheckRunOptions{Name: "af preview", HeadSHA: strings.Repeat("a", 40), DetailsURL: github.String("/runs/1")}, "not an absolute URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(s.Refusals())
			s.ExpectRefusals(1)
			_, _, err := c.Checks.CreateCheckRun(ctx, "acme", "shop", tc.opt)
			var er *github.ErrorResponse
			if !errors.As(err, &er) || er.Response.StatusCode != 422 {
				t.Fatalf("got %v, want a 422 refusal", err)
			}
			r := s.Refusals()
			if len(r) != before+1 || !strings.Contains(r[len(r)-1], tc.why) {
				t.Fatalf("refusals %q, want one naming %q", r[before:], tc.why)
			}
		})
	}
	if n := len(s.CheckRuns()); n != 0 {
		t.Fatalf("%d check runs kept from refused requests", n)
	}
	run, _, err := c.Checks.CreateCheckRun(ctx, "acme", "shop", github.CreateCheckRunOptions{Name: "af preview", HeadSHA: strings.Repeat("a", 40), Status: github.String("in_progress")})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Checks.UpdateCheckRun(ctx, "acme", "shop", run.GetID(), github.UpdateCheckRunOptions{Name: "af preview", Conclusion: github.String("success")}); err != nil {
		t.Fatal(err)
	}
	if got := s.CheckRuns(); len(got) != 1 || got[0].Status != "completed" || got[0].Conclusion != "success" || got[0].Writes != 2 {
		t.Fatalf("check runs %+v", got)
	}
}

func TestDeploymentsAndStatuses(t *testing.T) {
	s := githubtest.New(t, "tok")
	var slept []time.Duration
	c := s.Client(t, "tok", &slept)
	ctx := context.Background()
	d, _, err := c.Repositories.CreateDeployment(ctx, "acme", "shop", &github.DeploymentRequest{Ref: github.String(strings.Repeat("c", 40)), Environment: github.String("pr-7"),
		TransientEnvironment: github.Bool(true), AutoMerge: github.Bool(false), RequiredContexts: &[]string{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Repositories.CreateDeploymentStatus(ctx, "acme", "shop", d.GetID(), &github.DeploymentStatusRequest{State: github.String("success"), EnvironmentURL: github.String("http://pr-7.preview.test/")}); err != nil {
		t.Fatal(err)
	}
	list, _, err := c.Repositories.ListDeployments(ctx, "acme", "shop", &github.DeploymentsListOptions{Environment: "pr-7"})
	if err != nil || len(list) != 1 {
		t.Fatalf("listed %d deployments (%v), want 1", len(list), err)
	}
	got := s.Deployments()[0]
	if got.AutoMerge || !got.Transient || got.Contexts == nil || len(got.Contexts) != 0 || got.Statuses[0].EnvironmentURL != "http://pr-7.preview.test/" {
		t.Fatalf("deployment %+v", got)
	}
}

func TestEventExamplesValidate(t *testing.T) {
	for _, action := range []string{"opened", "synchronize", "reopened", "labeled", "closed"} {
		b := githubtest.PullRequestEvent(t, action, "acme/shop", 7, strings.Repeat("d", 40), action == "labeled", "af-preview")
		if !strings.Contains(string(b), `"number":7`) {
			t.Fatalf("%s: number not set", action)
		}
	}
}
