package images

import (
	"context"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

func TestDetect(t *testing.T) {
	for _, c := range []struct{ context, kind, cluster string }{
		{"k3d-previews", TargetK3d, "previews"},
		{"kind-kind", TargetKind, "kind"},
		{"kind-ci-1", TargetKind, "ci-1"},
		{"k3d-", TargetRegistry, ""},
		{"kind-", TargetRegistry, ""},
		{"kind", TargetRegistry, ""},
		{"my-kind-cluster", TargetRegistry, ""},
		{"gke_acme_europe-west1_previews", TargetRegistry, ""},
		{"arn:aws:eks:eu-west-1:1:cluster/k3d-lookalike", TargetRegistry, ""},
		{"af-testcluster", TargetRegistry, ""},
		{"", TargetRegistry, ""},
	} {
		kind, cluster := Detect(c.context)
		if kind != c.kind || cluster != c.cluster {
			t.Errorf("Detect(%q) = %s %q, want %s %q", c.context, kind, cluster, c.kind, c.cluster)
		}
	}
}

func TestFor(t *testing.T) {
	p, err := For(Options{Context: "kind-ci"})
	if err != nil || p.Target() != "kind cluster ci (import into its nodes)" {
		t.Errorf("kind: %v %v", p, err)
	}
	if got := p.(*NodeImport).Command("/x.tar"); strings.Join(got, " ") != "kind load image-archive /x.tar --name ci" {
		t.Errorf("kind command: %v", got)
	}
	p, _ = For(Options{Context: "k3d-dev"})
	if got := p.(*NodeImport).Command("/x.tar"); strings.Join(got, " ") != "k3d image import /x.tar --cluster dev" {
		t.Errorf("k3d command: %v", got)
	}
	if _, err := For(Options{Context: "prod"}); err == nil || !strings.Contains(err.Error(), "runtime.registry") {
		t.Errorf("a pulling cluster without a registry: %v", err)
	}
	if _, err := For(Options{Context: "prod", Registry: "Not A Registry"}); err == nil {
		t.Errorf("an invalid registry was accepted")
	}
	p, err = For(Options{Context: "prod", Registry: "ghcr.io/acme/previews/"})
	if err != nil || p.Target() != "registry ghcr.io/acme/previews" {
		t.Errorf("registry: %v %v", p, err)
	}
	// A node import whose tool is missing says which command and what to do.
	ni := &NodeImport{Tool: TargetK3d, Cluster: "nope"}
	t.Setenv("PATH", t.TempDir())
	img := mustRandom(t)
	if _, err := ni.Publish(context.Background(), img, "shop/web"); err == nil || !strings.Contains(err.Error(), "AF-RUN-046") || !strings.Contains(err.Error(), "k3d image import") {
		t.Errorf("missing k3d: %v", err)
	}
}

func mustRandom(t *testing.T) v1.Image {
	t.Helper()
	img, err := random.Image(1<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	return img
}
