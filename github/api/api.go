// Package api makes the GitHub API clients the action and the App use: go-github pointed
// at an API URL (github.com, GitHub Enterprise or a test's stand-in), authenticated by a
// token, behind a transport that honours GitHub's rate limits (the primary limit, secondary
// limits with retry-after, and HTTP 429, which go-github v62 does not classify), and a
// function that turns the errors go-github returns into catalogued ones.
package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/antifailure/af/failure"
)

// ActionsBot is the login of what a workflow's GITHUB_TOKEN writes: the action's comments and
// check runs are this bot's unless the action is given an App's token.
const ActionsBot = "github-actions[bot]"

// DefaultMaxWait is how long, in all, a client waits out rate limits before it gives up.
const DefaultMaxWait = 5 * time.Minute

// Options configure a client.
type Options struct {
	// APIURL is the REST API's root, e.g. https://api.github.com (GITHUB_API_URL).
	APIURL string
	// Token authenticates every request; empty sends none.
	Token string
	// Base is the transport under the rate-limit handling (default http.DefaultTransport).
	Base http.RoundTripper
	// MaxWait bounds the total time spent waiting out rate limits (default DefaultMaxWait).
	MaxWait time.Duration
	// Sleep waits d or until ctx ends (default: a timer); tests make it record instead.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock the reset header is read against (default time.Now).
	Now func() time.Time
	// Progress is told of every wait.
	Progress func(format string, args ...any)
	// Authenticate, when set, authenticates instead of Token: it wraps the rate-limit
	// transport (a GitHub App's installation transport, which mints and refreshes its tokens
	// through the transport it wraps, so token requests honour rate limits too).
	Authenticate func(http.RoundTripper) http.RoundTripper
	// Stats, when set, is where the transport counts (several clients may share one).
	Stats *Stats
}

// Stats counts what a client did, for the action's measured overhead.
type Stats struct {
	mu       sync.Mutex
	Requests int
	Retries  int
	Waited   time.Duration
	Elapsed  time.Duration
	// Remaining is the last X-RateLimit-Remaining GitHub sent, -1 before any.
	Remaining int
}

// NewStats returns counters with no rate-limit reading yet.
func NewStats() *Stats { return &Stats{Remaining: -1} }

// RateRemaining returns the last X-RateLimit-Remaining seen, -1 before any.
func (s *Stats) RateRemaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Remaining
}

// Snapshot returns a copy safe to read.
func (s *Stats) Snapshot() (requests, retries int, waited, elapsed time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Requests, s.Retries, s.Waited, s.Elapsed
}

// New returns a go-github client for o, and the counters of its transport.
func New(o Options) (*github.Client, *Stats, error) {
	st := o.Stats
	if st == nil {
		st = NewStats()
	}
	t := &Transport{Base: o.Base, MaxWait: o.MaxWait, Sleep: o.Sleep, Now: o.Now, Progress: o.Progress, Stats: st}
	var rt http.RoundTripper = t
	if o.Authenticate != nil {
		rt = o.Authenticate(t)
	}
	c := github.NewClient(&http.Client{Transport: rt})
	if o.Token != "" && o.Authenticate == nil {
		c = c.WithAuthToken(o.Token)
	}
	api := strings.TrimRight(o.APIURL, "/")
	if api == "" {
		api = "https://api.github.com"
	}
	base, err := c.BaseURL.Parse(api + "/")
	if err != nil || base.Scheme == "" || base.Host == "" {
		return nil, nil, failure.Newf(failure.ActionInputInvalid, "the GitHub API URL %q is not an absolute URL", o.APIURL)
	}
	c.BaseURL = base
	c.UploadURL = base
	return c, t.Stats, nil
}

// Transport retries requests GitHub refused for rate limits, after the wait GitHub names.
type Transport struct {
	Base     http.RoundTripper
	MaxWait  time.Duration
	Sleep    func(ctx context.Context, d time.Duration) error
	Now      func() time.Time
	Progress func(format string, args ...any)
	Stats    *Stats
}

// RoundTrip sends req, waiting out and retrying rate-limit refusals while the total wait stays
// within MaxWait.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	maxWait := t.MaxWait
	if maxWait <= 0 {
		maxWait = DefaultMaxWait
	}
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	start := time.Now()
	var waited time.Duration
	backoff := time.Minute
	for attempt := 0; ; attempt++ {
		r := req.Clone(req.Context())
		if body != nil {
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		resp, err := base.RoundTrip(r)
		t.count(func(s *Stats) {
			s.Requests++
			s.Elapsed += time.Since(start)
			if resp != nil {
				if n, err := strconv.Atoi(resp.Header.Get("X-RateLimit-Remaining")); err == nil {
					s.Remaining = n
				}
			}
		})
		start = time.Now()
		if err != nil {
			return nil, err
		}
		wait, limited := t.limited(resp, backoff)
		if !limited {
			return resp, nil
		}
		if waited+wait > maxWait {
			return resp, nil // go-github turns it into a rate-limit error; Classify names it
		}
		resp.Body.Close()
		if t.Progress != nil {
			t.Progress("GitHub rate limit on %s %s (HTTP %d): waiting %s before retrying", req.Method, req.URL.Path, resp.StatusCode, wait.Round(time.Second))
		}
		if err := t.sleep(req.Context(), wait); err != nil {
			return nil, err
		}
		waited += wait
		backoff *= 2
		t.count(func(s *Stats) {
			s.Retries++
			s.Waited += wait
		})
	}
}

func (t *Transport) count(f func(*Stats)) {
	if t.Stats == nil {
		return
	}
	t.Stats.mu.Lock()
	defer t.Stats.mu.Unlock()
	f(t.Stats)
}

func (t *Transport) sleep(ctx context.Context, d time.Duration) error {
	if t.Sleep != nil {
		return t.Sleep(ctx, d)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// limited says whether resp is a rate-limit refusal and how long to wait: retry-after when
// given, else until x-ratelimit-reset, else the backoff (GitHub's advice for secondary limits).
func (t *Transport) limited(resp *http.Response, backoff time.Duration) (time.Duration, bool) {
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
	case http.StatusForbidden:
		if resp.Header.Get("X-RateLimit-Remaining") != "0" && resp.Header.Get("Retry-After") == "" && !secondary(resp) {
			return 0, false
		}
	default:
		return 0, false
	}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			return time.Duration(n) * time.Second, true
		}
	}
	if resp.Header.Get("X-RateLimit-Remaining") == "0" {
		if n, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			now := time.Now
			if t.Now != nil {
				now = t.Now
			}
			if d := time.Unix(n, 0).Sub(now()) + time.Second; d > 0 {
				return d, true
			}
			return time.Second, true
		}
	}
	return backoff, true
}

// secondary peeks at a 403's body for GitHub's secondary-limit wording, leaving the body
// readable.
func secondary(resp *http.Response) bool {
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return err == nil && bytes.Contains(bytes.ToLower(b), []byte("secondary rate limit"))
}

// Classify turns an error from a go-github call into a catalogued failure saying what was
// asked: AF-GH-004 for rate limits, AF-GH-003 otherwise. A nil err stays nil.
func Classify(what string, err error) error {
	if err == nil {
		return nil
	}
	if fe := failure.As(err); fe != nil {
		return err
	}
	var rl *github.RateLimitError
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &rl) || errors.As(err, &abuse) {
		return failure.New(failure.RateLimited, what, err)
	}
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		// 429, which go-github v62 does not classify; and a secondary limit whose documentation
		// link go-github does not recognise (older GitHub Enterprise Server wording).
		if er.Response.StatusCode == http.StatusTooManyRequests ||
			(er.Response.StatusCode == http.StatusForbidden && strings.Contains(strings.ToLower(er.Message), "secondary rate limit")) {
			return failure.New(failure.RateLimited, what, err)
		}
		return failure.New(failure.GitHubRequestFailed, fmt.Sprintf("%s: HTTP %d %s", what, er.Response.StatusCode, er.Message), err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return failure.New(failure.Interrupted, what, err)
	}
	return failure.New(failure.GitHubRequestFailed, what, err)
}
