package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/github/api"
	"github.com/antifailure/af/github/githubtest"
)

// Every kind of rate-limit refusal is waited out for the time GitHub names, then retried.
func TestRateLimitsWaitedOut(t *testing.T) {
	s := githubtest.New(t, "tok")
	var slept []time.Duration
	c := s.Client(t, "tok", &slept)
	s.Limit("429", "secondary", "primary")
	if _, _, err := c.Issues.CreateComment(context.Background(), "acme", "shop", 1, &github.IssueComment{Body: github.String("x")}); err != nil {
		t.Fatal(err)
	}
	if len(slept) != 3 || slept[0] != time.Second || slept[1] != time.Second || slept[2] <= 0 || slept[2] > 3*time.Second {
		t.Fatalf("waited %v, want 1s, 1s and up to the reset", slept)
	}
	if n := len(s.Comments(1)); n != 1 {
		t.Fatalf("%d comments after the retries, want exactly 1", n)
	}
}

// Beyond the wait budget each kind of refusal comes back as AF-GH-004, having waited no more
// than the budget, and nothing was written.
func TestRateLimitBeyondTheBudget(t *testing.T) {
	for _, kind := range []string{"429", "secondary", "primary"} {
		t.Run(kind, func(t *testing.T) {
			s := githubtest.New(t, "tok")
			var waited time.Duration
			c, _, _ := api.New(api.Options{APIURL: s.URL, Token: "tok", MaxWait: 1500 * time.Millisecond,
				Sleep: func(_ context.Context, d time.Duration) error { waited += d; return nil }})
			s.Limit(kind, kind, kind)
			_, _, err := c.Issues.CreateComment(context.Background(), "acme", "shop", 1, &github.IssueComment{Body: github.String("x")})
			if !errors.Is(api.Classify("commenting", err), failure.RateLimited) {
				t.Fatalf("got %v, want AF-GH-004", api.Classify("commenting", err))
			}
			if waited > 1500*time.Millisecond {
				t.Fatalf("waited %s, beyond the 1.5s budget", waited)
			}
			if n := len(s.Comments(1)); n != 0 {
				t.Fatalf("%d comments written while limited", n)
			}
		})
	}
}

// Classify: what go-github leaves as a plain ErrorResponse but is a rate limit (429; a 403
// secondary limit without the documentation link go-github knows), and a 403 that is not.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		status int
		msg    string
		want   *failure.Entry
	}{
		{http.StatusTooManyRequests, "Too Many Requests", failure.RateLimited},
		{http.StatusForbidden, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.", failure.RateLimited},
		{http.StatusForbidden, "Resource not accessible by integration", failure.GitHubRequestFailed},
		{http.StatusNotFound, "Not Found", failure.GitHubRequestFailed},
	} {
		err := &github.ErrorResponse{Response: &http.Response{StatusCode: c.status, Request: &http.Request{Method: "POST", URL: &url.URL{Path: "/x"}}}, Message: c.msg}
		if got := api.Classify("commenting", err); !errors.Is(got, c.want) {
			t.Errorf("%d %q: %v, want %s", c.status, c.msg, got, c.want.Code)
		}
	}
}
