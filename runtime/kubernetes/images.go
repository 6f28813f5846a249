package kubernetes

// Images as the cluster pulls them: published archives, references pinned to digests, the
// pull secret.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"strings"

	afruntime "github.com/antifailure/af/runtime"
	corev1 "k8s.io/api/core/v1"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/images"
	"github.com/antifailure/af/images/engine"
	"github.com/antifailure/af/version"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
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
