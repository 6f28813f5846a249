package app

// The teardown itself: the pull request's environments found by their labels and removed
// through the Kubernetes runtime's Down, then, with the repository's GitHub mutations never
// sent at once, af's comment rewritten once to say the environment is gone and the
// deployment marked inactive.

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/antifailure/af/envid"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/github/appclient"
	"github.com/antifailure/af/github/report"
	"github.com/antifailure/af/github/rest"
	afruntime "github.com/antifailure/af/runtime"
)

// ClusterOf is rt as the App's Cluster: its Down and Reachable, its Lister and its Watcher.
// A runtime without a Lister cannot be the App's (AF-RUN-044); one without a Watcher reports
// every environment's watch as absent.
func ClusterOf(rt afruntime.Runtime) (Cluster, error) {
	l := rt.Lister()
	if l == nil {
		return nil, failure.Newf(failure.RuntimeCannot, "the %s runtime cannot find environments by their labels, which the App and af reap need", rt.Name())
	}
	return runtimeCluster{Runtime: rt, lister: l, watcher: rt.Watcher()}, nil
}

type runtimeCluster struct {
	afruntime.Runtime
	lister  afruntime.Lister
	watcher afruntime.Watcher
}

func (c runtimeCluster) Environments(ctx context.Context, f afruntime.Filter) ([]afruntime.Environment, error) {
	return c.lister.Environments(ctx, f)
}

func (c runtimeCluster) Watch(ctx context.Context, ref afruntime.Ref) (*afruntime.Watch, error) {
	if c.watcher == nil {
		return &afruntime.Watch{State: afruntime.WatchAbsent, Detail: fmt.Sprintf("the %s runtime keeps no watch", c.Name())}, nil
	}
	return c.watcher.Watch(ctx, ref)
}

// Cluster is what the App needs of a runtime (ClusterOf makes one of a runtime).
type Cluster interface {
	// Environments lists af's environments by their labels; never a namespace without them.
	Environments(ctx context.Context, f afruntime.Filter) ([]afruntime.Environment, error)
	// Down removes one environment and waits until it is gone; it refuses a namespace that
	// is not af's or is another repository's.
	Down(ctx context.Context, ref afruntime.Ref) error
	// Reachable says whether the cluster answers (readiness).
	Reachable(ctx context.Context) error
	// Watch reads an environment's containment as its probe sees it now (it changes nothing).
	Watch(ctx context.Context, ref afruntime.Ref) (*afruntime.Watch, error)
}

// Reporters gives a Reporter for a repository: *appclient.Clients provides it.
type Reporters interface {
	Reporter(ctx context.Context, repository string, installation int64) (*report.Reporter, error)
	// Forget drops what is cached for repository and installation after GitHub refused it.
	Forget(repository string, installation int64)
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
// rewritten is left as it is. Before it removes anything it reads the pull request again: an
// open one (reopened since the delivery that asked for this, which may be late, replayed or
// retried) loses nothing, unless its time ran out (ReasonExpired). A pull request or
// repository GitHub no longer has, or a repository the App is no longer installed on, ends
// the teardown as a PermanentError once the environments its labels name are removed.
func (x *Teardowner) Run(ctx context.Context, t Teardown) (err error) {
	start := time.Now()
	log := x.log().With("delivery", t.Delivery, "repository", t.Repository, "pull_request", t.PullRequest)
	result := "ok"
	defer func() {
		if x.Observe != nil {
			if err != nil {
				result = "error"
			}
			x.Observe(time.Since(start), result)
		}
	}()
	var rep *report.Reporter
	state := ""
	if x.GitHub != nil && t.PullRequest != 0 && t.Repository != "" {
		if rep, state, err = x.readPull(ctx, t, log); err != nil {
			return &stepError{side: "github", err: err}
		}
		if state == "open" && t.Reason != report.ReasonExpired {
			log.Info("the pull request is open again (reopened after it was closed): nothing is removed")
			result = "open"
			return nil
		}
	}
	envs, err := x.Cluster.Environments(ctx, afruntime.Filter{Repository: t.Repository, PullRequest: t.PullRequest})
	if err != nil {
		return &stepError{side: "cluster", err: err}
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
			return &stepError{side: "cluster", err: err}
		}
		removed = append(removed, e)
	}
	if len(removed) == 0 {
		log.Info("no environment of this pull request is left on the cluster")
	}
	switch state {
	case "gone", "uninstalled":
		what := "GitHub no longer has the pull request or its repository"
		if state == "uninstalled" {
			what = "the App is no longer installed on the repository (or it is gone)"
		}
		return &PermanentError{Reason: state, Err: fmt.Errorf("%s: its environments were removed by their labels (%d), nothing can be reported", what, len(removed))}
	}
	if rep == nil {
		return nil
	}
	unlock := x.repos.lock(strings.ToLower(t.Repository)) // never two mutations at once per repository
	defer unlock()
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
	if appclient.Gone(err) {
		return &PermanentError{Reason: "gone", Err: err}
	}
	if err != nil {
		return &stepError{side: "github", err: err}
	}
	return nil
}

// readPull reads pull request t.PullRequest through a reporter of its repository. state is
// "open" or "closed"; "gone" when GitHub answers that the pull request or its repository does
// not exist; "uninstalled" when the App has no installation on the repository. An
// installation GitHub refuses (401, 404: the App reinstalled since the delivery, or the cached
// one removed) is dropped from the cache and looked up again once.
func (x *Teardowner) readPull(ctx context.Context, t Teardown, log *slog.Logger) (*report.Reporter, string, error) {
	inst := t.InstallationID
	for try := 0; ; try++ {
		rep, err := x.GitHub.Reporter(ctx, t.Repository, inst)
		if err == nil {
			var pull rest.Pull
			if pull, err = rep.PullRequest(ctx, t.PullRequest); err == nil {
				if pull.Open {
					return rep, "open", nil
				}
				return rep, "closed", nil
			}
		}
		status := appclient.Status(err)
		if try == 0 && (status == http.StatusUnauthorized || status == http.StatusNotFound) {
			x.GitHub.Forget(t.Repository, inst)
			log.Warn("GitHub refused the installation's token or found nothing; looking the installation up again", "installation", inst, "status", status)
			inst = 0
			continue
		}
		if appclient.Gone(err) {
			if rep == nil {
				return nil, "uninstalled", nil
			}
			return nil, "gone", nil
		}
		return nil, "", err
	}
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
