package kubernetes

// The environment's sidecar: its configuration Secret, its Deployment, and the wait for it.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/antifailure/af/failure"
	sidecarconfig "github.com/antifailure/af/sidecar/config"
)

// startSidecar writes the sidecar's Service, configuration and Deployment and waits for it.
func (r *Runtime) startSidecar(ctx context.Context, t *target, e *env, dbURL string) error {
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
	r.progress(ctx).Printf("sidecar %s at %s (image %s): waiting until it is ready", SidecarName, e.SidecarIP, e.EngineImage)
	return r.waitDeployment(ctx, t, SidecarName, 1, r.opts.SidecarTimeout)
}
