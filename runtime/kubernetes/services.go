package kubernetes

// Migrations and services, in dependency order, each behind the gate.

import (
	"context"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antifailure/af/manifest"
)

// migrate runs a service's migration Job once and waits for it; a Job that already succeeded
// with the same spec is not run again, one that failed is replaced.
func (r *Runtime) migrate(ctx context.Context, t *target, e *env, name string, s *manifest.Service) error {
	job := e.migrationJob(name, s)
	jobs := t.c.cs.BatchV1().Jobs(t.ns)
	if old, err := jobs.Get(ctx, job.Name, metav1.GetOptions{}); err == nil {
		switch {
		case jobDone(old, "Complete"):
			r.progress(ctx).Printf("migration of %s: already succeeded (job %s), not run again", name, job.Name)
			return nil
		case jobDone(old, "Failed"):
			r.progress(ctx).Printf("migration of %s: job %s failed before; running it again", name, job.Name)
			if err := r.deleteJob(ctx, t, job.Name); err != nil {
				return err
			}
		}
	} else if !apierrors.IsNotFound(err) {
		return apiError(t.c, "reading job "+job.Name, err)
	}
	if _, err := jobs.Create(ctx, job, metav1.CreateOptions{FieldManager: FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
		return apiError(t.c, "creating job "+job.Name, err)
	}
	r.progress(ctx).Printf("migration of %s: job %s running %s", name, job.Name, strings.Join(s.Migrate.Argv(), " "))
	return r.waitJob(ctx, t, name, job.Name, r.opts.MigrationTimeout)
}

// startServices starts every service once the services it depends on are ready and its
// migration has succeeded. A migration waits only for the services its migrate_after names
// (default none: it needs the database, which is there before anything runs), so it runs
// beside the services its own service depends on. Services with no order between them start
// together; the first failure stops the others from starting.
func (r *Runtime) startServices(ctx context.Context, t *target, e *env) error {
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
			if !s.Migrate.IsZero() {
				if !waitFor(gctx, s.MigrateAfter) {
					return nil
				}
				start := time.Now()
				if err := r.migrate(gctx, t, e, name, s); err != nil {
					return err
				}
				e.timeline.done("migration "+name, start)
			}
			if !waitFor(gctx, s.DependsOn) {
				return nil
			}
			start := time.Now()
			if err := r.startService(gctx, t, e, name, s); err != nil {
				return err
			}
			e.timeline.done("service "+name, start)
			close(ready[name])
			return nil
		})
	}
	return g.Wait()
}

// startService applies a service's Deployment and Service and waits for every instance.
func (r *Runtime) startService(ctx context.Context, t *target, e *env, name string, s *manifest.Service) error {
	d := e.deployment(name, s)
	if _, err := apply(ctx, t.c, t.c.cs.AppsV1().Deployments(t.ns), "apps/v1", "Deployment", name, d); err != nil {
		return err
	}
	if svc := e.service(name, s); svc != nil {
		if _, err := apply(ctx, t.c, t.c.cs.CoreV1().Services(t.ns), "v1", "Service", name, svc); err != nil {
			return err
		}
	}
	r.progress(ctx).Printf("service %s: %d instance(s) of %s, waiting until all are ready", name, *d.Spec.Replicas, e.Images[name])
	return r.waitDeployment(ctx, t, name, int(*d.Spec.Replicas), r.opts.ReadyTimeout)
}
