package kubernetes

// What af's credential may do beyond af's own namespaces, asked of the API server before af up
// creates anything: RBAC is bound cluster-wide (af makes a namespace per pull request), so only
// an admission policy (deploy/ci/admission.yaml) keeps the credential to its previews, and
// only a request that passes admission can tell whether one does.

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antifailure/af/failure"
)

// credentialReach asks, by server-side dry run (authorization and admission run; nothing is
// written), whether the credential may create a namespace without af's label and a pod in the
// cluster resolver's namespace (kube-system), and returns what of that it may do. A request
// that cannot be answered either way is said on the progress channel and counts as neither.
func (r *Runtime) credentialReach(ctx context.Context, t *target) []string {
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: FieldManager}
	no := false
	system, _, _ := strings.Cut(r.opts.Resolver, "/")
	asks := []struct {
		what string
		try  func() error
	}{
		{"create a namespace without af's label", func() error {
			_, err := t.c.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "af-credential-check-"}}, dry)
			return err
		}},
		{"create pods in " + system, func() error {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "af-credential-check-"}, Spec: corev1.PodSpec{
				AutomountServiceAccountToken: &no,
				Containers:                   []corev1.Container{{Name: "check", Image: r.opts.EngineImage}},
			}}
			_, err := t.c.cs.CoreV1().Pods(system).Create(ctx, p, dry)
			return err
		}},
	}
	var reach []string
	for _, a := range asks {
		switch err := a.try(); {
		case err == nil:
			reach = append(reach, a.what)
		case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
			// Refused by RBAC or by an admission policy: bounded.
		default:
			r.progress(ctx).Printf("credential check: whether context %q may %s could not be told (%v)", t.c.context, a.what, err)
		}
	}
	return reach
}

// checkCredential warns, or refuses with AF-RUN-056 when the operator asked for a bounded
// credential (AF_REQUIRE_BOUNDED_CREDENTIAL), when the credential reaches past af's namespaces.
func (r *Runtime) checkCredential(ctx context.Context, t *target) error {
	reach := r.credentialReach(ctx, t)
	if len(reach) == 0 {
		return nil
	}
	what := strings.Join(reach, " and ")
	if r.opts.RequireBoundedCredential {
		return failure.Newf(failure.CredentialUnbounded, "context %q may %s, by server-side dry run", t.c.context, what)
	}
	r.progress(ctx).Printf("warning: context %q reaches past af's namespaces: it may %s (by server-side dry run). Whoever holds it can; deploy/ci/admission.yaml confines af's CI identity to its previews (docs/github.md), and AF_REQUIRE_BOUNDED_CREDENTIAL=1 makes this a refusal", t.c.context, what)
	return nil
}
