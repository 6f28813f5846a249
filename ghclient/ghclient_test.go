package ghclient_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/ghclient"
	"github.com/antifailure/af/githubtest"
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
	// Beyond the wait budget the refusal comes back as AF-GH-004.
	var long []time.Duration
	c2, _, _ := ghclient.New(ghclient.Options{APIURL: s.URL, Token: "tok", MaxWait: 1500 * time.Millisecond,
		Sleep: func(_ context.Context, d time.Duration) error { long = append(long, d); return nil }})
	s.Limit("429", "429")
	_, _, err := c2.Issues.CreateComment(context.Background(), "acme", "shop", 1, &github.IssueComment{Body: github.String("x")})
	if !errors.Is(ghclient.Classify("commenting", err), failure.RateLimited) {
		t.Fatalf("got %v, want AF-GH-004", ghclient.Classify("commenting", err))
	}
}
