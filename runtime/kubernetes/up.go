package kubernetes

import (
	"context"
	"strings"
	"time"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
)

// Up brings the environment up, step by step as docs/runtime.md ("af up, in order") gives
// them: refuse what cannot work, the credential, the capacity preflight, images, the cluster's
// ranges, the ingress controller, the namespace (held by this run: writer.go), ceilings and
// policies, the sidecar and the probe beside the workloads held at their gates, the services
// released in their order, the preview URLs.
func (r *Runtime) Up(ctx context.Context, spec afruntime.Spec) (res *afruntime.Result, err error) {
	return r.up(ctx, spec, false)
}

// up is Up; with probeOnly (af check) it stops after the probe's verdict, having written no
// workload: the steps before it are af up's own.
func (r *Runtime) up(ctx context.Context, spec afruntime.Spec, probeOnly bool) (res *afruntime.Result, err error) {
	parent := ctx
	var writer *writerHold // from the namespace step on: this run is the environment's one writer
	defer func() {
		if writer != nil {
			// A removal wins over whatever the step that met it made of it (a probe that got
			// no answer, an object not found): the environment is gone, and this run says so.
			if err != nil && writer.removed() {
				err = removedError(writer.t)
			}
			writer.release()
		}
		err = interrupted(parent, "bringing environment "+spec.ID+" up", err)
	}()
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
	if r.opts.EngineImage == "" {
		return nil, failure.Newf(failure.UsageInvalid, "no engine image for the sidecar, the gate and the probe")
	}

	t, err := r.resolve(ctx, spec.Ref)
	if err != nil {
		return nil, err
	}
	ceil, err := ceilingsOf(t.m.Limits)
	if err != nil {
		return nil, failure.New(failure.ManifestInvalid, err.Error(), err)
	}
	res = &afruntime.Result{Environment: t.id, Namespace: t.ns, Context: t.c.context}
	tl := newTimeline()
	defer func() {
		if res != nil {
			res.Phases = tl.list()
		}
	}()
	p := r.progress(ctx)
	var (
		proxyImage string
		ranges     clusterRanges
		ingressCtl *IngressController
		e          *env
		w          *workloads
	)
	// The steps of af up, in the design's order. Each is timed into res.Phases (a step that
	// had nothing to do says so with recorded false); from the probe on, a failure returns
	// what is known so far (the probe's verdict) with the error.
	steps := []struct {
		name       string
		keepResult bool
		run        func() (recorded bool, err error)
	}{
		{"credential", false, func() (bool, error) { return true, r.checkCredential(ctx, t) }},
		{"capacity preflight", false, func() (bool, error) { return true, r.preflight(ctx, t, nil) }},
		{"images", false, func() (bool, error) {
			var err error
			if proxyImage, err = r.publishImages(ctx, t, spec.Archives, images); err != nil {
				return false, err
			}
			r.pinImages(ctx, t, spec, images)
			return len(spec.Archives) > 0 || proxyImage != r.opts.EngineImage, nil
		}},
		// The cluster's own ranges, before anything is created: a cidr rule they cannot be
		// kept out of is refused with nothing made.
		{"cluster ranges", false, func() (bool, error) {
			ranges = r.discoverRanges(ctx, t)
			for _, g := range ranges.Gaps {
				p.Printf("cluster ranges: %s", g)
			}
			if err := refuseUnknownRanges(t.m, ranges); err != nil {
				return false, err
			}
			p.Printf("cluster ranges the sidecar never reaches: %s", strings.Join(ranges.Strings(), ", "))
			return true, nil
		}},
		// The ingress controller the policy lets in, before anything is created: preview URLs
		// nothing can serve fail now, never after a timeout.
		{"ingress controller", false, func() (bool, error) {
			var err error
			ingressCtl, err = r.ingressController(ctx, t)
			return ingressCtl != nil, err
		}},
		{"namespace and policies", false, func() (bool, error) {
			created, err := r.ensureNamespace(ctx, t, spec)
			if err != nil {
				return false, err
			}
			if writer, err = r.holdWriter(ctx, t, spec.Holder, r.asks(t.m)); err != nil {
				return false, err
			}
			if writer != nil {
				ctx = writer.ctx // every later step ends when the environment is removed
			}
			// Again, now that this run's lease says what it asks: of runs started together, the
			// first that fit go on; the others stop here, before any pod, and leave no namespace
			// they made.
			if err := r.preflight(ctx, t, writer); err != nil {
				if created {
					if w := writer; w != nil {
						writer = nil // this run removes its namespace: no removal to report
						w.release()
					}
					r.dropNamespace(ctx, t)
				}
				return false, err
			}
			resolver, err := r.resolver(ctx, t)
			if err != nil {
				return false, err
			}
			e = &env{
				ID: t.id, Namespace: t.ns, Manifest: t.m, Images: images, EngineImage: proxyImage,
				GateEnv: r.opts.GateEnv, Domain: r.opts.ClusterDomain, IPv6: r.opts.IPv6, Resolver: resolver,
				HasDatabase: dbURL != "", Cluster: ranges.Prefixes, Ceilings: ceil, timeline: tl,
				negativeControl: r.opts.negativeControl,
			}
			e.IngressFrom = ingressCtl
			// The ceilings before any pod: the limit range sizes every container made after it.
			if err := r.ensureCeilings(ctx, t, e); err != nil {
				return false, err
			}
			for _, np := range e.policies() {
				if _, err := apply(ctx, t.c, t.c.cs.NetworkingV1().NetworkPolicies(t.ns), "networking.k8s.io/v1", "NetworkPolicy", np.Name, np); err != nil {
					return false, err
				}
			}
			p.Printf("namespace %s: %d NetworkPolicies (deny all; services to the sidecar and each other only)", t.ns, len(e.policies()))
			if err := r.databaseSecret(ctx, t, e, dbURL); err != nil {
				return false, err
			}
			return true, r.pullSecret(ctx, t, e)
		}},
		// The sidecar, the probe and every workload together: the probe's rounds wait until the
		// sidecar answers (a round without it proves nothing), so the probe pod is scheduled and
		// started while the sidecar becomes ready; the services' and migrations' pods are
		// scheduled and run their gates meanwhile, each held after its gate (holds.go). No
		// application code runs before the probe has passed: only then are holds released.
		{"sidecar and probe", true, func() (bool, error) {
			verdict, err := r.sidecarAndProbe(ctx, t, e, func(ctx context.Context) (err error) {
				if probeOnly {
					return nil
				}
				w, err = r.writeWorkloads(ctx, t, e)
				return err
			})
			res.Probe = verdict
			return false, err
		}},
		{"services", true, func() (bool, error) { return true, r.startServices(ctx, t, e, w) }},
		{"preview URLs", true, func() (bool, error) {
			urls, err := r.previewURLs(ctx, t, e)
			res.URLs = urls
			return len(urls) > 0, err
		}},
	}
	for _, s := range steps {
		start := time.Now()
		recorded, err := s.run()
		if recorded {
			tl.done(s.name, start)
		}
		if err != nil {
			if !s.keepResult {
				return nil, err
			}
			return res, err
		}
		if probeOnly && s.name == "sidecar and probe" {
			return res, nil
		}
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
	// What the services wait for, checked as the manifest's validation checks it: a caller may
	// build the manifest without parsing it.
	return manifest.CheckDependencies(m.Services)
}
