// Package up implements `af up`: bring an environment up and print its probe verdict, its
// services and their URLs.
package up

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/antifailure/af/cmd/af/internal/envtarget"
	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/cmd/af/internal/render"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
	"github.com/antifailure/af/preview"
	afruntime "github.com/antifailure/af/runtime"
)

// NewCmdUp returns `af up`.
func NewCmdUp(f *factory.Factory) *cobra.Command {
	var fl envtarget.Flags
	var images, archives []string
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Bring an environment up: namespace, policies, sidecar, probe, services",
		Long: `Creates or converges the environment for this manifest, in this order: its namespace
(labelled dev.antifailure.managed=true), default-deny NetworkPolicies, the egress sidecar, the
probe (which must find every route out denied before any application image runs), migrations,
then the services behind the gate, waiting until every instance is ready. Running it again
converges; it never creates duplicates.

Images: services with image: run that image; services built from source need --image
SERVICE=REF naming an image the cluster can pull, or --image-archive SERVICE=PATH naming a
docker archive; without either, af builds them with the container daemon (DOCKER_HOST, at
most AF_BUILD_TIMEOUT each, default 15m). Built and archived images are published before the
namespace is made: pushed to runtime.registry and deployed by digest, or imported into the
nodes of a kind-* or k3d-* context.
The engine image (sidecar, gate, probe) is this build's own, or AF_ENGINE_IMAGE (old name: AF_PROXY_IMAGE).`,
		Example: `  af up --env demo --image web=registry.local/web@sha256:...
  af up --pr 42 --repo acme/shop -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rt, ref, err := fl.Resolve(cmd.Context(), f)
			if err != nil {
				return err
			}
			imgs, err := pairs("--image", "SERVICE=REF", images)
			if err != nil {
				return err
			}
			tars, err := pairs("--image-archive", "SERVICE=PATH", archives)
			if err != nil {
				return err
			}
			if err := build(cmd.Context(), f, ref.Manifest, imgs, tars); err != nil {
				return err
			}
			envtarget.Progress(f).Printf("engine image (sidecar, gate, probe): %s", envtarget.EngineImage(f))
			start := time.Now()
			res, _, err := preview.Up(cmd.Context(), rt, afruntime.Spec{Ref: ref, PullRequest: fl.PR, Images: imgs, Archives: tars, Getenv: f.Getenv}, envtarget.Progress(f))
			if err != nil {
				if res != nil && res.Probe != nil && !f.IO.JSON() {
					render.Probe(f.IO.Out, res.Probe)
				}
				return err
			}
			if f.IO.JSON() {
				return f.WriteJSON(res)
			}
			render.Result(f.IO.Out, res)
			f.Infof("environment %s is up in namespace %s (%s)", res.Environment, res.Namespace, time.Since(start).Round(100*time.Millisecond))
			return nil
		},
	}
	fl.Add(cmd)
	cmd.Flags().StringArrayVar(&images, "image", nil, "SERVICE=REF: the image a service runs, already pullable by the cluster (repeatable)")
	cmd.Flags().StringArrayVar(&archives, "image-archive", nil, "SERVICE=PATH: a docker archive (docker save) af publishes for the service: pushed to runtime.registry and deployed by digest, or imported into the nodes of a kind-/k3d- context (repeatable)")
	return cmd
}

// build builds every build: service given neither --image nor --image-archive
// (preview.Build), from the manifest's directory.
func build(ctx context.Context, f *factory.Factory, m *manifest.Manifest, imgs, tars map[string]string) error {
	base := "."
	if f.Options.File != "-" {
		base = filepath.Dir(f.Options.File)
	}
	return preview.Build(ctx, f.Getenv, envtarget.Progress(f), m, base, imgs, tars)
}

// pairs reads repeated KEY=VALUE flags.
func pairs(flag, form string, values []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range values {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" {
			return nil, failure.Newf(failure.UsageInvalid, "%s %q: write %s", flag, kv, form)
		}
		if _, dup := out[k]; dup {
			return nil, failure.Newf(failure.UsageInvalid, "%s names %s twice", flag, k)
		}
		out[k] = v
	}
	return out, nil
}
