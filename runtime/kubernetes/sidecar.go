package kubernetes

// The environment's sidecar: its configuration Secret, its Deployment, and the wait for it.

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/gate"
	sidecarconfig "github.com/antifailure/af/sidecar/config"
)

// sidecarAndProbe writes the sidecar, starts the probe beside it and waits for both: the
// sidecar ready, the probe's verdict. beside runs meanwhile, from the moment the sidecar's
// address is known (it writes the held workloads). The sidecar's failure is the one reported when several
// fail (the probe cannot answer without it), then the probe's, then beside's.
func (r *Runtime) sidecarAndProbe(ctx context.Context, t *target, e *env, dbURL string, beside func(context.Context) error) (*gate.Result, error) {
	start := time.Now()
	if err := r.applySidecar(ctx, t, e, dbURL); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sidecarErr := make(chan error, 1)
	go func() {
		err := r.waitDeployment(ctx, t, SidecarName, 1, r.opts.SidecarTimeout)
		if err == nil {
			e.timeline.done("sidecar", start)
		} else if ctx.Err() == nil {
			cancel() // the probe cannot answer without it
		}
		sidecarErr <- err
	}()
	besideErr := make(chan error, 1)
	go func() {
		start := time.Now()
		err := beside(ctx)
		if err == nil {
			e.timeline.done("workloads written", start)
		}
		besideErr <- err
	}()
	probeStart := time.Now()
	var verdict *gate.Result
	var err error
	if r.opts.negativeControl == "" {
		verdict, err = r.probe(ctx, t, e)
	} else {
		r.progress(ctx).Printf("negative control (tests only): the probe is not run")
	}
	if err != nil {
		cancel() // no verdict: the sidecar's readiness no longer matters
	}
	serr, berr := <-sidecarErr, <-besideErr
	if serr != nil && (err == nil || !errors.Is(serr, context.Canceled)) {
		return verdict, serr
	}
	if err != nil {
		return verdict, err
	}
	e.timeline.done("probe", probeStart)
	if verdict != nil && verdict.SidecarMS > 0 {
		// The probe's own rounds, from the first that found the sidecar answering.
		e.timeline.done("probe rounds", time.Now().Add(-time.Duration((verdict.MS-verdict.SidecarMS)*float64(time.Millisecond))))
	}
	return verdict, berr
}

// applySidecar writes the sidecar's Service, configuration and Deployment.
func (r *Runtime) applySidecar(ctx context.Context, t *target, e *env, dbURL string) error {
	svc, err := apply(ctx, t.c, t.c.cs.CoreV1().Services(t.ns), "v1", "Service", SidecarName, e.sidecarService())
	if err != nil {
		return err
	}
	e.SidecarIP = svc.Spec.ClusterIP
	cfg := sidecarconfig.Config{
		Environment:     t.id,
		Namespace:       t.ns,
		ClusterDomain:   r.opts.ClusterDomain,
		Services:        sortedKeys(t.m.Services),
		ClusterResolver: e.Resolver.Addr,
		AdvertiseIPv4:   e.SidecarIP,
		ClusterCIDRs:    clusterStrings(e.Cluster),
		Egress:          t.m.Egress,
	}
	if _, err := cfg.Resolve(); err != nil {
		return failure.New(failure.SidecarConfigInvalid, err.Error(), err)
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("encoding the sidecar configuration: %w", err)
	}
	secret := &corev1.Secret{
		ObjectMeta: meta(SidecarConfigName, t.ns, e.labels(RoleSidecar, "")),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{sidecarConfigFile: data},
	}
	if _, err := apply(ctx, t.c, t.c.cs.CoreV1().Secrets(t.ns), "v1", "Secret", secret.Name, secret); err != nil {
		return err
	}
	if dbURL != "" {
		db := &corev1.Secret{
			ObjectMeta: meta(DatabaseSecret, t.ns, e.labels("database", "")),
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{"url": []byte(dbURL)},
		}
		if _, err := apply(ctx, t.c, t.c.cs.CoreV1().Secrets(t.ns), "v1", "Secret", db.Name, db); err != nil {
			return err
		}
	}
	d := e.sidecarDeployment(specHash(data))
	if _, err := apply(ctx, t.c, t.c.cs.AppsV1().Deployments(t.ns), "apps/v1", "Deployment", d.Name, d); err != nil {
		return err
	}
	r.progress(ctx).Printf("sidecar %s at %s (image %s): waiting until it is ready; the probe starts beside it", SidecarName, e.SidecarIP, e.EngineImage)
	return nil
}
