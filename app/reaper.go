package app

// The reaper: every interval, af's environments listed by their labels, and those whose pull
// request is no longer open (GitHub asked once per repository, 100 open pull requests to a
// request) or whose time to live has run out handed to the teardown queue. A lost webhook, a
// cancelled workflow or a teardown dropped at shutdown costs at most one interval. Each sweep
// also reads every environment's watch (its probe checking again while it runs): one that is
// not contained is logged as an error and exported in the metrics, never passed over.

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/antifailure/af/github/report"
	afruntime "github.com/antifailure/af/runtime"
)

// Removal is one environment a sweep removes (or, dry, would remove), and why.
type Removal struct {
	Environment afruntime.Environment `json:"environment"`
	Reason      string                `json:"reason"`
}

// Sweep is what one sweep found and did.
type Sweep struct {
	At       time.Time `json:"at"`
	Checked  int       `json:"checked"`
	Removals []Removal `json:"removals"`
	// Kept lists environments left alone and why, when that is not obvious (no pull request
	// and no expiry, or GitHub could not be asked).
	Kept []Removal `json:"kept,omitempty"`
	// Errors are the repositories GitHub could not be asked about: their environments stay
	// until a later sweep can ask.
	Errors []string `json:"errors,omitempty"`
	DryRun bool     `json:"dry_run,omitempty"`
	// Watches is each environment's containment as its probe last saw it (those the sweep
	// removes included: they run until the teardown).
	Watches []EnvWatch `json:"watches,omitempty"`
	// Live counts the environments found by repository, and Oldest is the age of each
	// repository's oldest (metrics).
	Live   map[string]int           `json:"-"`
	Oldest map[string]time.Duration `json:"-"`
}

// EnvWatch is one environment's watch as a sweep read it.
type EnvWatch struct {
	Namespace  string `json:"namespace"`
	Repository string `json:"repository,omitempty"`
	State      string `json:"state"`
	Detail     string `json:"detail"`
}

// Reaper sweeps.
type Reaper struct {
	Cluster Cluster
	// GitHub answers which pull requests are open; nil reaps by expiry only.
	GitHub OpenPulls
	// Queue takes the removals (the App's pool); nil with DryRun only lists them.
	Queue  Queue
	DryRun bool
	Now    func() time.Time
	Log    *slog.Logger
	// Observe, when set, is told of each sweep (metrics).
	Observe func(s *Sweep, err error)
	// Report, when set (and not DryRun), is told when an environment of a pull request is
	// seen escaped, and when one it was told of is contained again: a check run on the pull
	// request. Each change is told once while this Reaper lives.
	Report ContainmentReporter

	mu   sync.Mutex
	told map[string]string // namespace → the state Report was last told
}

// OpenPulls answers which pull requests of a repository are open, and whether a closed one
// was merged (asked only of those the sweep removes, so the comment gives the right reason).
type OpenPulls interface {
	OpenPulls(ctx context.Context, repository string) (map[int]bool, error)
	Merged(ctx context.Context, repository string, n int) (bool, error)
}

// Sweep runs one sweep.
func (r *Reaper) Sweep(ctx context.Context) (s *Sweep, err error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	log := r.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s = &Sweep{At: now().UTC(), DryRun: r.DryRun, Removals: []Removal{}}
	defer func() {
		if r.Observe != nil {
			r.Observe(s, err)
		}
	}()
	envs, err := r.Cluster.Environments(ctx, afruntime.Filter{})
	if err != nil {
		return s, err
	}
	s.Checked = len(envs)
	s.Live, s.Oldest = map[string]int{}, map[string]time.Duration{}
	for _, e := range envs {
		repo := e.Repository
		if repo == "" {
			repo = "(none)"
		}
		s.Live[repo]++
		if age := s.At.Sub(e.Created); !e.Created.IsZero() && age > s.Oldest[repo] {
			s.Oldest[repo] = age
		}
	}
	sort.Slice(envs, func(i, j int) bool { return envs[i].Namespace < envs[j].Namespace })
	r.readWatches(ctx, s, envs, log)
	byRepo := map[string][]afruntime.Environment{}
	for _, e := range envs {
		switch {
		case !e.Expires.IsZero() && !e.Expires.After(s.At):
			s.Removals = append(s.Removals, Removal{e, fmt.Sprintf("%s (expired %s)", report.ReasonExpired, e.Expires.Format(time.RFC3339))})
		case e.PullRequest > 0 && e.Repository != "":
			byRepo[e.Repository] = append(byRepo[e.Repository], e)
		case e.Expires.IsZero():
			s.Kept = append(s.Kept, Removal{e, "no pull request and no time to live: removed only by af down"})
		}
	}
	repos := make([]string, 0, len(byRepo))
	for repo := range byRepo {
		repos = append(repos, repo)
	}
	sort.Strings(repos)
	for _, repo := range repos {
		if r.GitHub == nil {
			for _, e := range byRepo[repo] {
				s.Kept = append(s.Kept, Removal{e, "no GitHub credentials to ask whether the pull request is open"})
			}
			continue
		}
		open, err := r.GitHub.OpenPulls(ctx, repo)
		if err != nil {
			if ctx.Err() != nil {
				return s, ctx.Err()
			}
			s.Errors = append(s.Errors, fmt.Sprintf("%s: %v", repo, err))
			log.Warn("could not ask GitHub which pull requests are open; their environments stay until a later sweep", "delivery", "reaper", "repository", repo, "error", err.Error())
			for _, e := range byRepo[repo] {
				s.Kept = append(s.Kept, Removal{e, "GitHub could not be asked: " + err.Error()})
			}
			continue
		}
		merged := map[int]bool{}
		for _, e := range byRepo[repo] {
			if open[e.PullRequest] {
				continue
			}
			reason := report.ReasonClosed
			m, asked := merged[e.PullRequest]
			if !asked {
				var err error
				if m, err = r.GitHub.Merged(ctx, repo, e.PullRequest); err != nil {
					if ctx.Err() != nil {
						return s, ctx.Err()
					}
					// Closed it is (it is not open); only the wording of the reason is unknown.
					log.Warn("could not ask GitHub whether the pull request was merged; the comment says closed", "delivery", "reaper", "repository", repo, "pull_request", e.PullRequest, "error", err.Error())
				}
				merged[e.PullRequest] = m
			}
			if m {
				reason = report.ReasonMerged
			}
			s.Removals = append(s.Removals, Removal{e, reason})
		}
	}
	sort.Slice(s.Removals, func(i, j int) bool { return s.Removals[i].Environment.Namespace < s.Removals[j].Environment.Namespace })
	if r.DryRun || r.Queue == nil {
		return s, nil
	}
	id := "reaper-" + s.At.Format("20060102T150405Z")
	for _, rm := range s.Removals {
		e := rm.Environment
		reason := rm.Reason
		if strings.HasPrefix(reason, report.ReasonExpired) {
			reason = report.ReasonExpired
		}
		t := Teardown{Delivery: id, Repository: e.Repository, PullRequest: e.PullRequest, Namespace: e.Namespace, Reason: reason}
		if err := r.Queue.Enqueue(t); err != nil {
			return s, fmt.Errorf("queueing the removal of %s: %w", e.Namespace, err)
		}
		log.Info("queued removal", "delivery", id, "namespace", e.Namespace, "repository", e.Repository, "pull_request", e.PullRequest, "reason", rm.Reason)
	}
	return s, nil
}
