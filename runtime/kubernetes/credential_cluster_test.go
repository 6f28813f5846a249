package kubernetes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/testcluster"
	"github.com/antifailure/af/version"
)

// TestCredentialReach: af up asks the API server, before it creates anything, whether its
// credential reaches past af's namespaces. The test cluster's admin credential may create a
// namespace without af's label and pods in kube-system: a warning, or AF-RUN-056 where the
// operator requires a bounded credential. The af-ci identity of deploy/ci, its admission
// policies applied, may do neither.
func TestCredentialReach(t *testing.T) {
	h := testcluster.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ci, err := h.CIKubeconfig(ctx, filepath.Join("..", ".."), dir)
	if err != nil {
		t.Fatal(err)
	}
	ciPath := filepath.Join(dir, "af-ci-flat.kubeconfig")
	if err := os.WriteFile(ciPath, []byte(ci), 0o600); err != nil {
		t.Fatal(err)
	}
	m := &manifest.Manifest{Name: "credential", Runtime: manifest.Runtime{Provider: "kubernetes"}}
	for _, c := range []struct {
		name, kubeconfig string
		reach            []string
	}{
		{"admin", h.Kubeconfig, []string{"create a namespace without af's label", "create pods in kube-system"}},
		{"af-ci with deploy/ci's policies", ciPath, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, require := range []bool{false, true} {
				var said []string
				r := New(Options{Kubeconfig: c.kubeconfig, EngineImage: version.LocalEngineImage, RequireBoundedCredential: require})
				pctx := afruntime.WithProgress(ctx, func(format string, args ...any) { said = append(said, format) })
				tg, err := r.resolve(pctx, afruntime.Ref{ID: "credential-check", Manifest: m})
				if err != nil {
					t.Fatal(err)
				}
				if got := r.credentialReach(pctx, tg); strings.Join(got, "; ") != strings.Join(c.reach, "; ") {
					t.Fatalf("reach %q, want %q (said: %q)", got, c.reach, said)
				}
				err = r.checkCredential(pctx, tg)
				switch {
				case len(c.reach) == 0 && err != nil:
					t.Fatalf("a bounded credential refused: %v", err)
				case len(c.reach) > 0 && require && !errors.Is(err, failure.CredentialUnbounded):
					t.Fatalf("required bounded: err %v, want %s", err, failure.CredentialUnbounded.Code)
				case len(c.reach) > 0 && !require && (err != nil || !strings.Contains(strings.Join(said, "\n"), "warning:")):
					t.Fatalf("not required: err %v, said %q; want a warning and no error", err, said)
				}
			}
		})
	}
}
