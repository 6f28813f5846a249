package kubernetes

// Migrations and services: every workload written at once with its hold closed (holds.go),
// then released in dependency order.

import (
	"context"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antifailure/af/manifest"
)

// workloads are what writeWorkloads made: the migration Job to wait for, by service ("" when
// the same migration already succeeded and runs no pod).
type workloads struct {
	jobs map[string]string
}

// writeWorkloads closes every hold, then writes every migration Job and every service's
// Deployment and Service. Nothing it writes runs application code: every pod's gate waits at
// its hold, which startServices releases. It runs beside the probe.
func (r *Runtime) writeWorkloads(ctx context.Context, t *target, e *env) (*workloads, error) {
	if err := r.closeHolds(ctx, t, e); err != nil {
		return nil, err
	}
	w := &workloads{jobs: map[string]string{}}
	for _, name := range manifest.StartOrder(t.m.Services) {
		s := t.m.Services[name]
		if !s.Migrate.IsZero() {
			job, err := r.writeMigration(ctx, t, e, name, s)
			if err != nil {
				return nil, err
			}
			w.jobs[name] = job
		}
		d := e.deployment(name, s)
		if _, err := apply(ctx, t.c, t.c.cs.AppsV1().Deployments(t.ns), "apps/v1", "Deployment", name, d); err != nil {
			return nil, err
		}
		if svc := e.service(name, s); svc != nil {
			if _, err := apply(ctx, t.c, t.c.cs.CoreV1().Services(t.ns), "v1", "Service", name, svc); err != nil {
				return nil, err
			}
		}
	}
	r.progress(ctx).Printf("workloads: %d service(s) and %d migration(s) written, each pod held after its gate until its turn", len(t.m.Services), len(w.jobs))
	return w, nil
}

// writeMigration writes a service's migration Job and returns its name; a Job that already
// succeeded with the same spec is not run again (""), one that failed is replaced.
func (r *Runtime) writeMigration(ctx context.Context, t *target, e *env, name string, s *manifest.Service) (string, error) {
	job := e.migrationJob(name, s)
	jobs := t.c.cs.BatchV1().Jobs(t.ns)
	if old, err := jobs.Get(ctx, job.Name, metav1.GetOptions{}); err == nil {
		switch {
		case jobDone(old, "Complete"):
			r.progress(ctx).Printf("migration of %s: already succeeded (job %s), not run again", name, job.Name)
			return "", nil
		case jobDone(old, "Failed"):
			r.progress(ctx).Printf("migration of %s: job %s failed before; running it again", name, job.Name)
			if err := r.deleteJob(ctx, t, job.Name); err != nil {
				return "", err
			}
		}
	} else if !apierrors.IsNotFound(err) {
		return "", apiError(t.c, "reading job "+job.Name, err)
	}
	if _, err := jobs.Create(ctx, job, metav1.CreateOptions{FieldManager: FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", apiError(t.c, "creating job "+job.Name, err)
	}
	return job.Name, nil
}

// startServices releases every workload in its turn, once the probe has passed: a migration
// once the services its migrate_after names are ready (default none: it needs the database,
// which is there before anything runs), so it runs beside the services its own service depends
// on; a service once the services it depends on are ready and its migration has succeeded.
// Services with no order between them start together; the first failure keeps every workload
// not yet released held.
func (r *Runtime) startServices(ctx context.Context, t *target, e *env, w *workloads) error {
	ready := map[string]chan struct{}{}
	for name := range t.m.Services {
		ready[name] = make(chan struct{})
	}
	waitFor := func(ctx context.Context, names []string) bool {
		for _, d := range names {
			select {
			case <-ready[d]:
			case <-ctx.Done():
				return false // another service failed; its error is the one reported
			}
		}
		return true
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, name := range manifest.StartOrder(t.m.Services) {
		s := t.m.Services[name]
		g.Go(func() error {
			if job := w.jobs[name]; job != "" {
				if !waitFor(gctx, s.MigrateAfter) {
					return nil
				}
				start := time.Now()
				if err := r.release(gctx, t, e, migrationHold(name)); err != nil {
					return err
				}
				r.progress(ctx).Printf("migration of %s: released, job %s running %s", name, job, strings.Join(s.Migrate.Argv(), " "))
				if err := r.waitJob(gctx, t, name, job, r.opts.MigrationTimeout); err != nil {
					return err
				}
				e.timeline.done("migration "+name, start)
			}
			if !waitFor(gctx, s.DependsOn) {
				return nil
			}
			start := time.Now()
			if err := r.release(gctx, t, e, serviceHold(name)); err != nil {
				return err
			}
			replicas := max(s.Replicas, 1)
			r.progress(ctx).Printf("service %s: released, %d instance(s) of %s, waiting until all are ready", name, replicas, e.Images[name])
			if err := r.waitDeployment(gctx, t, name, replicas, r.opts.ReadyTimeout); err != nil {
				return err
			}
			e.timeline.done("service "+name, start)
			close(ready[name])
			return nil
		})
	}
	return g.Wait()
}
