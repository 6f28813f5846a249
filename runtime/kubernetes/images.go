package kubernetes

// Images as the cluster pulls them: published archives, references pinned to digests, the
// pull secret.

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/images"
	"github.com/antifailure/af/images/engine"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/version"
)

// publishImages makes every archive pullable by the cluster and records the reference, and
// publishes the engine image too when Options.PublishEngine names af's binary. It returns the
// engine image to run.
func (r *Runtime) publishImages(ctx context.Context, t *target, archives, refs map[string]string) (string, error) {
	proxy := r.opts.EngineImage
	if len(archives) == 0 && r.opts.PublishEngine == "" {
		return proxy, nil
	}
	registry := t.m.Runtime.Registry
	pub, err := images.For(images.Options{
		Context: t.c.context, Containerd: r.opts.Containerd, Registry: registry, Insecure: images.LoopbackRegistry(registry), Auth: r.opts.RegistryAuth, Progress: r.progress(ctx),
	})
	if err != nil {
		if len(archives) > 0 {
			return proxy, err
		}
		r.progress(ctx).Printf("engine image: %s as it is (no registry or node import to publish af's own to)", proxy)
		return proxy, nil
	}
	if len(archives) > 0 {
		r.progress(ctx).Printf("images: publishing %d to %s", len(archives), pub.Target())
	}
	for _, name := range slices.Sorted(maps.Keys(archives)) {
		img, err := tarball.ImageFromPath(archives[name], nil)
		if err != nil {
			return proxy, failure.Newf(failure.UsageInvalid, "the image archive of %s (%s) is not a docker archive: %v", name, archives[name], err)
		}
		p, err := pub.Publish(ctx, img, t.m.Name+"/"+name)
		if err != nil {
			return proxy, err
		}
		refs[name] = p.Ref
		r.progress(ctx).Printf("images: %s is %s (%d bytes uploaded, %d of them layers)", name, p.Ref, p.Uploaded, p.LayerBytes)
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
		r.progress(ctx).Printf("engine image: af's own binary published to %s as %s (%d bytes uploaded)", pub.Target(), p.Ref, p.Uploaded)
	}
	return proxy, nil
}

// pinImages turns image: references under runtime.registry's host into digests, so a moving
// tag cannot change what an environment runs. A reference that cannot be resolved is used as
// written, and said.
func (r *Runtime) pinImages(ctx context.Context, t *target, spec afruntime.Spec, refs map[string]string) {
	for _, svc := range slices.Sorted(maps.Keys(refs)) {
		if spec.Archives[svc] != "" || spec.Images[svc] != "" {
			continue // published by af, or given on the command line as it should run
		}
		pinned, ok, err := images.Pin(ctx, t.m.Runtime.Registry, r.opts.RegistryAuth, refs[svc])
		switch {
		case err != nil:
			r.progress(ctx).Printf("images: %s runs %s as written: its digest could not be read (%v)", svc, refs[svc], err)
		case ok:
			refs[svc] = pinned
			r.progress(ctx).Printf("images: %s pinned to %s", svc, pinned)
		}
	}
}

// pullSecret writes an image pull secret for runtime.registry, before any pod needs it, and has
// every pod use it: from the pull credential (PullAuth), else from the credentials af pushes
// with unless they stay out of the cluster (PushOnly); none when they are anonymous.
func (r *Runtime) pullSecret(ctx context.Context, t *target, e *env) error {
	if t.m.Runtime.Registry == "" {
		return nil
	}
	auth, from := r.opts.PullAuth, "the pull credential"
	if auth == nil {
		if r.opts.PushOnly {
			r.progress(ctx).Printf("no image pull secret: the push credentials stay out of the cluster and no pull credential was given (the nodes pull %s on their own)", t.m.Runtime.Registry)
			return nil
		}
		auth, from = r.opts.RegistryAuth, "the credentials af pushes with"
	}
	host, data, err := images.PullSecret(t.m.Runtime.Registry, auth)
	if err != nil || data == nil {
		return err
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
	r.progress(ctx).Printf("image pull secret %s for %s (from %s)", RegistrySecret, host, from)
	return nil
}

// imagesFor returns every service's image: the one given for it, else the manifest's image:.
func imagesFor(spec afruntime.Spec) (map[string]string, error) {
	out := map[string]string{}
	var missing []string
	for _, name := range slices.Sorted(maps.Keys(spec.Manifest.Services)) {
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
