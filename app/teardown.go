package app

// The teardown itself: the pull request's environments found by their labels and removed
// through the Kubernetes runtime's Down, then, with the repository's GitHub mutations never
// sent at once, af's comment rewritten once to say the environment is gone and the
// deployment marked inactive.

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/antifailure/af/envid"
	"github.com/antifailure/af/github/report"
	afruntime "github.com/antifailure/af/runtime"
)

// Cluster is what the App needs of a runtime: the Kubernetes runtime provides it.
type Cluster interface {
	// Environments lists af's environments by their labels; never a namespace without them.
	Environments(ctx context.Context, f afruntime.Filter) ([]afruntime.Environment, error)
	// Down removes one environment and waits until it is gone; it refuses a namespace that
	// is not af's or is another repository's.
	Down(ctx context.Context, ref afruntime.Ref) error
	// Reachable says whether the cluster answers (readiness).
	Reachable(ctx context.Context) error
}

// Reporters gives a Reporter for a repository: *GitHub provides it.
type Reporters interface {
	Reporter(ctx context.Context, repository string, installation int64) (*report.Reporter, error)
}

// Teardowner carries out teardowns; its Run is the pool's Executor.
type Teardowner struct {
	Cluster Cluster
	// GitHub, when set, is told: the comment rewritten, the deployment inactive.
	GitHub Reporters
	Log    *slog.Logger
	Now    func() time.Time
	// Observe, when set, is told of each teardown's duration and result (metrics).
	Observe func(d time.Duration, result string)
	// Hook, when set, runs as each environment's removal starts and ends (tests prove with it
	// that no namespace is handled by two workers at once).
	Hook func(namespace string, start bool)

	repos keyedLocks
}

// Run tears t down. It is idempotent: what is already gone is skipped, a comment already
// rewritten is left as it is.
func (x *Teardowner) Run(ctx context.Context, t Teardown) (err error) {
	start := time.Now()
	log := x.log().With("delivery", t.Delivery, "repository", t.Repository, "pull_request", t.PullRequest)
	defer func() {
		if x.Observe != nil {
			result := "ok"
			if err != nil {
				result = "error"
			}
			x.Observe(time.Since(start), result)
		}
	}()
	envs, err := x.Cluster.Environments(ctx, afruntime.Filter{Repository: t.Repository, PullRequest: t.PullRequest})
	if err != nil {
		return err
	}
	var removed []afruntime.Environment
	for _, e := range envs {
		if t.Namespace != "" && e.Namespace != t.Namespace {
			continue
		}
		if t.PullRequest == 0 && e.PullRequest != 0 {
			continue // a manual environment's teardown never takes a pull request's
		}
		if x.Hook != nil {
			x.Hook(e.Namespace, true)
		}
		log.Info("removing environment", "namespace", e.Namespace, "environment", e.ID, "reason", t.Reason)
		err := x.Cluster.Down(afruntime.WithProgress(ctx, func(format string, args ...any) {
			log.Info(fmt.Sprintf(format, args...), "namespace", e.Namespace)
		}), afruntime.Ref{ID: e.ID, Namespace: e.Namespace, Repository: t.Repository})
		if x.Hook != nil {
			x.Hook(e.Namespace, false)
		}
		if err != nil {
			return err
		}
		removed = append(removed, e)
	}
	if len(removed) == 0 {
		log.Info("no environment of this pull request is left on the cluster")
	}
	if x.GitHub == nil || t.PullRequest == 0 || t.Repository == "" {
		return nil
	}
	unlock := x.repos.lock(strings.ToLower(t.Repository)) // never two mutations at once per repository
	defer unlock()
	rep, err := x.GitHub.Reporter(ctx, t.Repository, t.InstallationID)
	if err != nil {
		return err
	}
	f := &report.Facts{State: report.Gone, Repository: t.Repository, PullRequest: t.PullRequest, At: x.now(), Reason: t.Reason}
	if len(removed) > 0 {
		f.Environment, f.Namespace = removed[0].ID, removed[0].Namespace
	} else if id, err := envid.ForPullRequest(t.Repository, t.PullRequest); err == nil {
		f.Environment = id
	}
	res, err := rep.Gone(ctx, f, report.GoneParts{Comment: true, Deployment: true})
	if res.Rewritten {
		log.Info("comment rewritten", "comment", res.CommentURL)
	}
	log.Info("deployments marked inactive", "deployments", res.Deactivated, "environment", report.Environment(t.PullRequest))
	return err
}

func (x *Teardowner) log() *slog.Logger {
	if x.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return x.Log
}

func (x *Teardowner) now() time.Time {
	if x.Now == nil {
		return time.Now()
	}
	return x.Now()
}

// keyedLocks is one mutex per key, made on first use.
type keyedLocks struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

func (k *keyedLocks) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*sync.Mutex{}
	}
	m := k.locks[key]
	if m == nil {
		m = &sync.Mutex{}
		k.locks[key] = m
	}
	k.mu.Unlock()
	m.Lock()
	return m.Unlock
}
