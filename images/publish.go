// Package images makes service images pullable by the cluster before any pod asks for one.
// One Publisher interface, one implementation per target: a registry the cluster pulls from
// (deployed by digest), or an import into the nodes of a kind or k3d cluster, or into the
// containerd of a node af runs on. Which one is chosen from AF_CONTAINERD_ADDRESS, the
// kubeconfig context's name and the manifest's runtime.registry only. The package also builds
// (build:, with a container daemon; Files, without one), pins references to digests and
// makes pull secrets.
package images

import (
	"context"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/antifailure/af/failure"
)

// Publisher makes one image available to the cluster and returns the reference pods run it by.
type Publisher interface {
	// Target names where images go, for progress ("registry ghcr.io/acme/previews").
	Target() string
	// Publish makes img pullable as name (a repository name without registry, e.g.
	// "shop/web") and returns the reference to deploy.
	Publish(ctx context.Context, img v1.Image, name string) (Published, error)
}

// Published is the outcome of one publish.
type Published struct {
	// Ref is what pods run: repo@sha256:... for a registry, the imported name for a node import.
	Ref string
	// Uploaded is how many request bytes went to the registry (blobs and manifest);
	// LayerBytes is the part of it that was blob uploads: 0 when the registry had every layer.
	Uploaded, LayerBytes int64
}

// Kind of target, detected from the context name.
const (
	TargetRegistry = "registry"
	TargetKind     = "kind"
	TargetK3d      = "k3d"
	// TargetContainerd imports into the containerd af runs beside (Options.Containerd).
	TargetContainerd = "containerd"
)

// Detect says which kind of target a kubeconfig context is: k3d-* contexts import into k3d's
// nodes, kind-* into kind's; every other context pulls from a registry. It looks at the name
// only, for nothing else.
func Detect(context string) (kind, cluster string) {
	switch {
	case strings.HasPrefix(context, "k3d-") && len(context) > len("k3d-"):
		return TargetK3d, strings.TrimPrefix(context, "k3d-")
	case strings.HasPrefix(context, "kind-") && len(context) > len("kind-"):
		return TargetKind, strings.TrimPrefix(context, "kind-")
	}
	return TargetRegistry, ""
}

// Options choose and configure a publisher.
type Options struct {
	// Context is the kubeconfig context in use.
	Context string
	// Containerd, when set, is the socket of the node's containerd af runs beside (a
	// single-node cluster): images are imported there, whatever the context.
	Containerd string
	// Registry is runtime.registry: the repository prefix for clusters that pull.
	Registry string
	// Insecure allows plain HTTP to the registry (a registry on loopback).
	Insecure bool
	// Auth, when set, is used instead of the docker config and platform keychains.
	Auth authn.Authenticator
	// Progress receives one line per step.
	Progress func(format string, args ...any)
}

// For returns the publisher for the context.
func For(o Options) (Publisher, error) {
	if o.Containerd != "" {
		return &NodeImport{Tool: TargetContainerd, Cluster: o.Containerd, Progress: o.Progress}, nil
	}
	kind, cluster := Detect(o.Context)
	switch kind {
	case TargetKind:
		return &NodeImport{Tool: TargetKind, Cluster: cluster, Progress: o.Progress}, nil
	case TargetK3d:
		return &NodeImport{Tool: TargetK3d, Cluster: cluster, Progress: o.Progress}, nil
	}
	if o.Registry == "" {
		return nil, failure.Newf(failure.ManifestInvalid, "context %q is neither a kind nor a k3d cluster, so its nodes pull images, and runtime.registry names no registry to push them to", o.Context).
			WithHint("Set runtime.registry (e.g. ghcr.io/acme/previews) to a registry the cluster can pull from.")
	}
	reg, err := NewRegistry(o.Registry, o.Insecure, o.Progress)
	if err != nil {
		return nil, err
	}
	reg.Auth = o.Auth
	return reg, nil
}

func progress(p func(string, ...any), format string, args ...any) {
	if p != nil {
		p(format, args...)
	}
}
