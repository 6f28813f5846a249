package kubernetes

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/antifailure/af/envid"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/gate"
	"github.com/antifailure/af/images"
	"github.com/antifailure/af/images/engine"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
	sidecarconfig "github.com/antifailure/af/sidecar/config"
	"github.com/antifailure/af/version"
)

// Up brings the environment up, in the order the design fixes: refuse what cannot work,
// namespace, policies, sidecar, probe, migrations, services, readiness.
func (r *Runtime) Up(ctx context.Context, spec afruntime.Spec) (res *afruntime.Result, err error) {
	defer func() { err = interrupted(ctx, "bringing environment "+spec.ID+" up", err) }()
	if err := r.refuse(spec); err != nil {
		return nil, err
	}
	given := map[string]string{}
	for k, v := range spec.Images {
		given[k] = v
	}
	for k := range spec.Archives {
		given[k] = "archive" // published below, once the context is known
	}
	images, err := imagesFor(afruntime.Spec{Ref: spec.Ref, Images: given})
	if err != nil {
		return nil, err
	}
	var dbURL string
	if db := spec.Manifest.Database; db != nil && db.Provider == "url" {
		if spec.Getenv != nil {
			dbURL = spec.Getenv(db.URLFrom)
		}
		if dbURL == "" {
			return nil, failure.Newf(failure.ManifestInvalid, "database.url_from names %s, which is not set in af's environment", db.URLFrom).
				WithHint("Set it (in CI, from a secret) before running af up.")
		}
	}
	if r.opts.ProxyImage == "" {
		return nil, failure.Newf(failure.UsageInvalid, "no engine image for the sidecar, the gate and the probe")
	}

	t, err := r.resolve(ctx, spec.Ref)
	if err != nil {
		return nil, err
	}
	res = &afruntime.Result{Environment: t.id, Namespace: t.ns, Context: t.c.context}
	phase := func(name string, start time.Time) {
		res.Phases = append(res.Phases, afruntime.Phase{Name: name, Elapsed: time.Since(start)})
	}
	p := r.opts.Progress

	start := time.Now()
	if err := r.preflight(ctx, t); err != nil {
		return nil, err
	}
	phase("capacity preflight", start)

	start = time.Now()
	proxyImage, err := r.publishImages(ctx, t, spec.Archives, images)
	if err != nil {
		return nil, err
	}
	r.pinImages(ctx, t, spec, images)
	if len(spec.Archives) > 0 || proxyImage != r.opts.ProxyImage {
		phase("images", start)
	}

	// The cluster's own ranges, before anything is created: a cidr rule they cannot be kept
	// out of is refused with nothing made.
	ranges := r.discoverRanges(ctx, t)
	for _, g := range ranges.Gaps {
		p.Printf("cluster ranges: %s", g)
	}
	if err := refuseUnknownRanges(t.m, ranges); err != nil {
		return nil, err
	}
	p.Printf("cluster ranges the sidecar never reaches: %s", strings.Join(ranges.Strings(), ", "))

	start = time.Now()
	if err := r.ensureNamespace(ctx, t, spec); err != nil {
		return nil, err
	}
	resolver, err := r.resolver(ctx, t)
	if err != nil {
		return nil, err
	}
	e := &env{
		ID: t.id, Namespace: t.ns, Manifest: t.m, Images: images, ProxyImage: proxyImage,
		GateEnv: r.opts.GateEnv, Domain: r.opts.ClusterDomain, IPv6: r.opts.IPv6, Resolver: resolver,
		HasDatabase: dbURL != "", Cluster: ranges.Prefixes,
	}
	if t.m.Runtime.Domain != "" && r.opts.IngressController != nil {
		e.IngressFrom = r.opts.IngressController
	}
	for _, np := range e.policies() {
		if _, err := apply(ctx, t.c, t.c.cs.NetworkingV1().NetworkPolicies(t.ns), "networking.k8s.io/v1", "NetworkPolicy", np.Name, np); err != nil {
			return nil, err
		}
	}
	p.Printf("namespace %s: %d NetworkPolicies (deny all; services to the sidecar and each other only)", t.ns, len(e.policies()))
	if err := r.pullSecret(ctx, t, e); err != nil {
		return nil, err
	}
	phase("namespace and policies", start)

	start = time.Now()
	if err := r.startSidecar(ctx, t, e, dbURL); err != nil {
		return nil, err
	}
	phase("sidecar", start)

	start = time.Now()
	verdict, err := r.probe(ctx, t, e)
	res.Probe = verdict
	phase("probe", start)
	if err != nil {
		return res, err
	}

	start = time.Now()
	if err := r.startServices(ctx, t, e); err != nil {
		return res, err
	}
	phase("services", start)

	start = time.Now()
	urls, err := r.publish(ctx, t, e)
	res.URLs = urls
	if err != nil {
		return res, err
	}
	if len(urls) > 0 {
		phase("preview URLs", start)
	}
	st, err := r.Status(ctx, spec.Ref)
	if err != nil {
		return res, err
	}
	res.Services = st.Services
	return res, nil
}

// refuse checks what this runtime cannot do, before anything touches the cluster.
func (r *Runtime) refuse(spec afruntime.Spec) error {
	m := spec.Manifest
	if m == nil {
		return failure.Newf(failure.UsageInvalid, "no manifest given")
	}
	if spec.ID == "" {
		return failure.Newf(failure.NameInvalid, "no environment id given")
	}
	if m.Database != nil && m.Database.Provider == "container" {
		return failure.Newf(failure.RuntimeCannot, "database.provider container: the %s runtime cannot route from the cluster to containers on this machine", Name).
			WithHint("Use provider: url with a database the environment can reach (and a cidr allow rule for its address when it is private).")
	}
	if len(m.Services) == 0 {
		return failure.Newf(failure.ManifestInvalid, "the manifest has no services")
	}
	for _, name := range sortedKeys(m.Services) {
		for _, d := range m.Services[name].DependsOn {
			if _, ok := m.Services[d]; !ok {
				return failure.Newf(failure.DependencyMissing, "service %q depends on %q, which the manifest does not define", name, d)
			}
			if d == name {
				return failure.Newf(failure.DependencyCycle, "service %q depends on itself", name)
			}
		}
	}
	if cycles := manifest.Cycles(m.Services); len(cycles) > 0 {
		var paths []string
		for _, c := range cycles {
			paths = append(paths, strings.Join(c, " -> "))
		}
		return failure.Newf(failure.DependencyCycle, "services depend on each other in a cycle: %s", strings.Join(paths, "; "))
	}
	return nil
}

// imagesFor returns every service's image: the one given for it, else the manifest's image:.
func imagesFor(spec afruntime.Spec) (map[string]string, error) {
	out := map[string]string{}
	var missing []string
	for _, name := range sortedKeys(spec.Manifest.Services) {
		s := spec.Manifest.Services[name]
		switch {
		case spec.Images[name] != "":
			out[name] = spec.Images[name]
		case s.Image != "":
			out[name] = s.Image
		default:
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, failure.Newf(failure.UsageInvalid, "services %s have no image: they are built from source (build:), and the runtime was given neither an image nor an archive for them", strings.Join(missing, ", ")).
			WithHint("`af up` builds build: services with the container daemon before it brings the environment up; otherwise pass --image SERVICE=REF or --image-archive SERVICE=PATH for each.")
	}
	for name := range spec.Images {
		if _, ok := spec.Manifest.Services[name]; !ok {
			return nil, failure.Newf(failure.UsageInvalid, "an image was given for %q, which the manifest does not define", name)
		}
	}
	return out, nil
}

// ensureNamespace creates the namespace with its labels in one call, or reuses it when af made
// it for this repository; anything else is refused untouched.
func (r *Runtime) ensureNamespace(ctx context.Context, t *target, spec afruntime.Spec) error {
	nss := t.c.cs.CoreV1().Namespaces()
	for attempt := 0; ; attempt++ {
		ns, err := nss.Get(ctx, t.ns, metav1.GetOptions{})
		if err == nil {
			if err := owned(&ns.ObjectMeta, spec.Repository); err != nil {
				return err
			}
			if ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating {
				return failure.Newf(failure.StillTerminating, "namespace %s is being deleted (since %s)", t.ns, ns.DeletionTimestamp.Format(time.RFC3339))
			}
			r.opts.Progress.Printf("namespace %s exists and is af's: reusing it", t.ns)
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return apiError(t.c, "reading namespace "+t.ns, err)
		}
		labels := map[string]string{LabelManaged: "true", LabelEnvironment: t.id, LabelManagedBy: "af"}
		ann := map[string]string{}
		if spec.Repository != "" {
			ann[AnnotationRepository] = spec.Repository
			if v := repoLabel(spec.Repository); v != "" {
				labels[LabelRepository] = v
			}
		}
		if spec.PullRequest > 0 {
			labels[LabelPullRequest] = strconv.Itoa(spec.PullRequest)
		}
		if ttl, err := t.m.Runtime.TTL.Value(); err == nil && ttl > 0 {
			exp := r.opts.Now().Add(ttl).UTC().Truncate(time.Second)
			labels[LabelExpires] = strconv.FormatInt(exp.Unix(), 10)
			ann[AnnotationExpiresAt] = exp.Format(time.RFC3339)
		}
		_, err = nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: t.ns, Labels: labels, Annotations: ann}}, metav1.CreateOptions{FieldManager: FieldManager})
		if apierrors.IsAlreadyExists(err) && attempt == 0 {
			continue // created meanwhile: judge it like any existing one
		}
		if err != nil {
			return apiError(t.c, "creating namespace "+t.ns, err)
		}
		r.opts.Progress.Printf("namespace %s created (%s=true, environment %s)", t.ns, LabelManaged, t.id)
		return nil
	}
}

// resolver finds the cluster resolver's Service and the pods behind it.
func (r *Runtime) resolver(ctx context.Context, t *target) (resolverRef, error) {
	ns, name, _ := strings.Cut(r.opts.Resolver, "/")
	svc, err := t.c.cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return resolverRef{}, failure.Newf(failure.ClusterLacks, "no cluster DNS Service %s/%s: the sidecar asks it about the environment's own names", ns, name).
			WithHint("Point af at the cluster's DNS Service (Options.Resolver, namespace/name).")
	}
	if err != nil {
		return resolverRef{}, apiError(t.c, "reading the cluster DNS Service "+r.opts.Resolver, err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone || len(svc.Spec.Selector) == 0 {
		return resolverRef{}, failure.Newf(failure.ClusterLacks, "the cluster DNS Service %s/%s has no cluster address or no selector", ns, name)
	}
	return resolverRef{Addr: net.JoinHostPort(svc.Spec.ClusterIP, "53"), Namespace: ns, Selector: svc.Spec.Selector}, nil
}

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
	r.opts.Progress.Printf("sidecar %s at %s (image %s): waiting until it is ready", SidecarName, e.SidecarIP, e.ProxyImage)
	return r.waitDeployment(ctx, t, SidecarName, 1, r.opts.SidecarTimeout)
}

// probe runs the probe pod, reads its verdict, records it on the namespace and deletes the pod,
// in every case.
func (r *Runtime) probe(ctx context.Context, t *target, e *env) (*gate.Result, error) {
	pods := t.c.cs.CoreV1().Pods(t.ns)
	if err := r.deletePod(ctx, t, ProbeName); err != nil {
		return nil, err
	}
	if _, err := pods.Create(ctx, e.probePod(), metav1.CreateOptions{FieldManager: FieldManager}); err != nil {
		return nil, apiError(t.c, "creating the probe pod", err)
	}
	defer func() {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := r.deletePod(c, t, ProbeName); err != nil {
			r.opts.Progress.Printf("could not delete the probe pod: %v", err)
		}
	}()
	r.opts.Progress.Printf("probe: trying every route out under the services' rules (public TCP, public DNS over UDP, metadata, API server, the IPv6 segment, the node)")
	pod, err := r.waitPodDone(ctx, t, ProbeName, r.opts.ProbeTimeout)
	if err != nil {
		return nil, err
	}
	logs, _ := r.podLog(ctx, t, ProbeName, "probe", false, 200)
	res, found := gate.ParseVerdict(logs)
	if !found {
		reason := "the probe printed no verdict"
		if cs := terminated(pod, "probe"); cs != nil {
			reason += fmt.Sprintf(" (exit %d, %s)", cs.ExitCode, cs.Reason)
		}
		return nil, failure.Newf(failure.NotContained, "%s; last lines:\n%s", reason, indent(lastLines(logs, 10))).
			WithHint("`af down` removes the namespace and its policies.")
	}
	r.recordProbe(ctx, t, &res)
	for _, a := range res.Routes {
		r.opts.Progress.Printf("probe: %-15s %-24s %-8s %6.0f ms  %s", a.Route, a.Target, a.Outcome, a.MS, a.Detail)
	}
	switch res.Verdict {
	case gate.Contained:
		r.opts.Progress.Printf("probe: contained (every route denied in %d rounds, %.0f ms)", res.Rounds, res.MS)
		return &res, nil
	case gate.Escape:
		var routes []string
		for _, a := range res.Escaped {
			routes = append(routes, fmt.Sprintf("%s (%s)", a.Route, a.Target))
		}
		return &res, failure.Newf(failure.NotContained, "the probe got out of namespace %s by %s; no service image was run", t.ns, strings.Join(routes, ", ")).
			WithHint("The namespace and its policies remain: `af down` removes them.")
	default:
		return &res, failure.Newf(failure.NotContained, "the probe could not observe containment in namespace %s: %s; no service image was run", t.ns, res.Reason).
			WithHint("The namespace and its policies remain: `af down` removes them.")
	}
}

func (r *Runtime) recordProbe(ctx context.Context, t *target, res *gate.Result) {
	data, err := json.Marshal(res)
	if err != nil {
		return
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationProbe: string(data)}}})
	if _, err := t.c.cs.CoreV1().Namespaces().Patch(ctx, t.ns, "application/merge-patch+json", patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		r.opts.Progress.Printf("could not record the probe verdict on namespace %s: %v", t.ns, err)
	}
}

// migrate runs a service's migration Job once and waits for it; a Job that already succeeded
// with the same spec is not run again, one that failed is replaced.
func (r *Runtime) migrate(ctx context.Context, t *target, e *env, name string, s *manifest.Service) error {
	job := e.migrationJob(name, s)
	jobs := t.c.cs.BatchV1().Jobs(t.ns)
	if old, err := jobs.Get(ctx, job.Name, metav1.GetOptions{}); err == nil {
		switch {
		case jobDone(old, "Complete"):
			r.opts.Progress.Printf("migration of %s: already succeeded (job %s), not run again", name, job.Name)
			return nil
		case jobDone(old, "Failed"):
			r.opts.Progress.Printf("migration of %s: job %s failed before; running it again", name, job.Name)
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
	r.opts.Progress.Printf("migration of %s: job %s running %s", name, job.Name, strings.Join(s.Migrate.Argv(), " "))
	return r.waitJob(ctx, t, name, job.Name, r.opts.MigrationTimeout)
}

// startServices starts every service once the services it depends on are ready: its
// migration first, then its instances. Services with no order between them start together;
// the first failure stops the others from starting.
func (r *Runtime) startServices(ctx context.Context, t *target, e *env) error {
	ready := map[string]chan struct{}{}
	for name := range t.m.Services {
		ready[name] = make(chan struct{})
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, name := range manifest.StartOrder(t.m.Services) {
		s := t.m.Services[name]
		g.Go(func() error {
			for _, d := range s.DependsOn {
				select {
				case <-ready[d]:
				case <-gctx.Done():
					return nil // another service failed; its error is the one reported
				}
			}
			if !s.Migrate.IsZero() {
				if err := r.migrate(gctx, t, e, name, s); err != nil {
					return err
				}
			}
			if err := r.startService(gctx, t, e, name, s); err != nil {
				return err
			}
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
	r.opts.Progress.Printf("service %s: %d instance(s) of %s, waiting until all are ready", name, *d.Spec.Replicas, e.Images[name])
	return r.waitDeployment(ctx, t, name, int(*d.Spec.Replicas), r.opts.ReadyTimeout)
}

func indent(s string) string {
	if s == "" {
		return "    (no output)"
	}
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// publishImages makes every archive pullable by the cluster and records the reference, and
// publishes the engine image too when Options.PublishEngine names af's binary. It returns the
// engine image to run.
func (r *Runtime) publishImages(ctx context.Context, t *target, archives, refs map[string]string) (string, error) {
	proxy := r.opts.ProxyImage
	if len(archives) == 0 && r.opts.PublishEngine == "" {
		return proxy, nil
	}
	registry := t.m.Runtime.Registry
	pub, err := images.For(images.Options{
		Context: t.c.context, Registry: registry, Insecure: loopbackRegistry(registry), Auth: r.opts.RegistryAuth, Progress: r.opts.Progress,
	})
	if err != nil {
		if len(archives) > 0 {
			return proxy, err
		}
		r.opts.Progress.Printf("engine image: %s as it is (no registry or node import to publish af's own to)", proxy)
		return proxy, nil
	}
	if len(archives) > 0 {
		r.opts.Progress.Printf("images: publishing %d to %s", len(archives), pub.Target())
	}
	for _, name := range sortedKeys(archives) {
		img, err := tarball.ImageFromPath(archives[name], nil)
		if err != nil {
			return proxy, failure.Newf(failure.UsageInvalid, "the image archive of %s (%s) is not a docker archive: %v", name, archives[name], err)
		}
		p, err := pub.Publish(ctx, img, t.m.Name+"/"+name)
		if err != nil {
			return proxy, err
		}
		refs[name] = p.Ref
		r.opts.Progress.Printf("images: %s is %s (%d bytes uploaded, %d of them layers)", name, p.Ref, p.Uploaded, p.LayerBytes)
	}
	if r.opts.PublishEngine != "" {
		img, err := engine.ImageFromFile(r.opts.PublishEngine, version.EngineDigest)
		if err != nil {
			return proxy, failure.New(failure.ImagePublish, "the engine image from "+r.opts.PublishEngine+": "+err.Error(), err)
		}
		p, err := pub.Publish(ctx, img, "af-engine")
		if err != nil {
			return proxy, err
		}
		proxy = p.Ref
		r.opts.Progress.Printf("engine image: af's own binary published to %s as %s (%d bytes uploaded)", pub.Target(), p.Ref, p.Uploaded)
	}
	return proxy, nil
}

// pinImages turns image: references under runtime.registry's host into digests, so a moving
// tag cannot change what an environment runs. Only that registry is asked: it is the one af is
// configured to talk to. A reference that cannot be resolved is used as written, and said.
func (r *Runtime) pinImages(ctx context.Context, t *target, spec afruntime.Spec, refs map[string]string) {
	prefix := t.m.Runtime.Registry
	if prefix == "" {
		return
	}
	host, _, _ := strings.Cut(prefix, "/")
	var opts []name.Option
	if loopbackRegistry(prefix) {
		opts = append(opts, name.Insecure)
	}
	for _, svc := range sortedKeys(refs) {
		if spec.Archives[svc] != "" || spec.Images[svc] != "" {
			continue // published by af, or given on the command line as it should run
		}
		ref, err := name.ParseReference(refs[svc], opts...)
		if err != nil || ref.Context().RegistryStr() != host {
			continue
		}
		if _, ok := ref.(name.Digest); ok {
			continue
		}
		ro := []remote.Option{remote.WithContext(ctx)}
		if r.opts.RegistryAuth != nil {
			ro = append(ro, remote.WithAuth(r.opts.RegistryAuth))
		} else {
			ro = append(ro, remote.WithAuthFromKeychain(authn.DefaultKeychain))
		}
		desc, err := remote.Head(ref, ro...)
		if err != nil {
			r.opts.Progress.Printf("images: %s runs %s as written: its digest could not be read (%v)", svc, refs[svc], err)
			continue
		}
		refs[svc] = ref.Context().Digest(desc.Digest.String()).String()
		r.opts.Progress.Printf("images: %s pinned to %s", svc, refs[svc])
	}
}

// pullSecret writes an image pull secret for runtime.registry when the credentials af pushes
// with (docker config, platform keychains) are not anonymous, before any pod needs it, and
// has every pod use it.
func (r *Runtime) pullSecret(ctx context.Context, t *target, e *env) error {
	prefix := t.m.Runtime.Registry
	if prefix == "" {
		return nil
	}
	host, _, _ := strings.Cut(prefix, "/")
	var opts []name.Option
	if loopbackRegistry(prefix) {
		opts = append(opts, name.Insecure)
	}
	reg, err := name.NewRegistry(host, opts...)
	if err != nil {
		return failure.Newf(failure.ManifestInvalid, "runtime.registry %q: %v", prefix, err)
	}
	auth := r.opts.RegistryAuth
	if auth == nil {
		auth, err = authn.DefaultKeychain.Resolve(reg)
	}
	if err != nil {
		return failure.New(failure.ImagePublish, fmt.Sprintf("reading the credentials for %s: %v", host, err), err)
	}
	cfg, err := auth.Authorization()
	if err != nil {
		return failure.New(failure.ImagePublish, fmt.Sprintf("reading the credentials for %s: %v", host, err), err)
	}
	if *cfg == (authn.AuthConfig{}) {
		return nil // anonymous: the registry is public to the cluster, or needs no secret
	}
	entry := map[string]string{}
	if cfg.Username != "" || cfg.Password != "" {
		entry["username"], entry["password"] = cfg.Username, cfg.Password
		entry["auth"] = base64.StdEncoding.EncodeToString([]byte(cfg.Username + ":" + cfg.Password))
	} else if cfg.Auth != "" {
		entry["auth"] = cfg.Auth
	}
	if cfg.IdentityToken != "" {
		entry["identitytoken"] = cfg.IdentityToken
	}
	if cfg.RegistryToken != "" {
		entry["registrytoken"] = cfg.RegistryToken
	}
	data, err := json.Marshal(map[string]any{"auths": map[string]any{host: entry}})
	if err != nil {
		return fmt.Errorf("encoding the pull secret: %w", err)
	}
	secret := &corev1.Secret{
		ObjectMeta: meta(RegistrySecret, t.ns, e.labels("registry", "")),
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: data},
	}
	if _, err := apply(ctx, t.c, t.c.cs.CoreV1().Secrets(t.ns), "v1", "Secret", secret.Name, secret); err != nil {
		return err
	}
	e.PullSecret = RegistrySecret
	r.opts.Progress.Printf("image pull secret %s for %s (from the credentials af pushes with)", RegistrySecret, host)
	return nil
}

// loopbackRegistry reports whether a registry prefix names this machine: such a registry is
// spoken to over plain HTTP.
func loopbackRegistry(prefix string) bool {
	host, _, _ := strings.Cut(prefix, "/")
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	ip := net.ParseIP(h)
	return h == "localhost" || ip != nil && ip.IsLoopback()
}

// publish gives every web service an Ingress at its preview host and waits until each URL
// (with its health path) stops answering 404, 502, 503 or 504: pods being ready does not mean
// the ingress controller routes to them yet. Redirects are never followed.
func (r *Runtime) publish(ctx context.Context, t *target, e *env) (map[string]string, error) {
	domain := t.m.Runtime.Domain
	if domain == "" {
		r.opts.Progress.Printf("no runtime.domain: no Ingress and no preview URL")
		return nil, nil
	}
	urls := map[string]string{}
	for _, name := range sortedKeys(t.m.Services) {
		s := t.m.Services[name]
		if manifest.KindOf(s) != "web" || s.Port == 0 {
			continue
		}
		host, err := envid.PreviewHost(t.id, name, domain)
		if err != nil {
			return urls, err
		}
		ing := e.ingress(name, s, host)
		if _, err := apply(ctx, t.c, t.c.cs.NetworkingV1().Ingresses(t.ns), "networking.k8s.io/v1", "Ingress", name, ing); err != nil {
			return urls, err
		}
		u := r.opts.URLScheme + "://" + host + "/"
		urls[name] = u
		check := strings.TrimSuffix(u, "/") + s.HealthPath
		if s.HealthPath == "" {
			check = u
		}
		r.opts.Progress.Printf("service %s: published at %s; waiting until %s answers", name, u, check)
		if err := r.waitURL(ctx, name, check); err != nil {
			return urls, err
		}
	}
	return urls, nil
}

// waitURL polls url until it answers with anything but 404, 502, 503 or 504.
func (r *Runtime) waitURL(ctx context.Context, service, url string) error {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	client := &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if r.opts.IngressAddress != "" {
					addr = r.opts.IngressAddress // the preview host, reached where the controller listens
				}
				return dialer.DialContext(ctx, network, addr)
			},
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	last := "no answer yet"
	err := poll(ctx, r.opts.ReadyTimeout, func(el time.Duration) {
		r.opts.Progress.Printf("  %s: %s (%s)", service, last, el)
	}, func() (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, failure.Newf(failure.Internal, "preview URL %s: %v", url, err)
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		last = resp.Status
		switch resp.StatusCode {
		case http.StatusNotFound, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return false, nil
		}
		r.opts.Progress.Printf("  %s: %s answered %s", service, url, resp.Status)
		return true, nil
	})
	if errors.Is(err, errTimeout) {
		return failure.Newf(failure.NotReady, "%s: the preview URL %s did not answer within %s (last: %s); the pods are ready, so the ingress controller does not route to them", service, url, r.opts.ReadyTimeout, last).
			WithHint("Check that the ingress controller serves this Ingress class and that AF_INGRESS_CONTROLLER names its pods, so the environment's policy lets it in.")
	}
	return err
}
