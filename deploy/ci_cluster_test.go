package deploy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/testcluster"
)

// attempt is one request af-ci's token could make past the previews. It returns the API
// server's refusal, or nil when the request was allowed (a dry run: nothing is changed).
type attempt struct {
	name string
	try  func(ctx context.Context, t *testing.T, h *testcluster.Handle, kc string) error
}

// privileged is a pod that is the node: privileged, host network and PIDs, the node's root.
const privileged = `apiVersion: v1
kind: Pod
metadata:
  name: af-ci-check-root
spec:
  hostNetwork: true
  hostPID: true
  containers:
    - name: c
      image: ` + testcluster.TestImageRef + `
      securityContext: {privileged: true}
      volumeMounts: [{name: root, mountPath: /host}]
  volumes:
    - name: root
      hostPath: {path: /}
`

// afShaped is a pod as af makes one: no API token, no capability added, nothing of the node.
const afShaped = `apiVersion: v1
kind: Pod
metadata:
  name: af-ci-check-shaped
spec:
  automountServiceAccountToken: false
  containers:
    - name: c
      image: ` + testcluster.TestImageRef + `
      securityContext:
        allowPrivilegeEscalation: false
        capabilities: {drop: ["ALL"], add: ["NET_BIND_SERVICE"]}
`

const (
	unmanagedNS = "af-ci-check-theirs"
	managedNS   = "af-ci-check-ours"
)

func dry(args ...string) []string { return append(args, "--dry-run=server") }

// TestCIIdentityBoundedByTheCluster: the af-ci identity exactly as docs/github.md sets it up
// (deploy/ci applied as written, a TokenRequest token in a kubeconfig). With RBAC alone each
// request below is allowed (the control: the test can tell); with deploy/ci/admission.yaml
// applied, the API server refuses every one of them, naming the policy, while what af does in
// its own namespaces is still allowed. af up and af down of the example with this identity:
// TestExampleUpAndDownAsCI (the command line) and action's TestActionUnderActDocumented.
func TestCIIdentityBoundedByTheCluster(t *testing.T) {
	h := testcluster.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const ci = "ci"
	// RBAC alone first: an earlier run's policies removed.
	if _, err := h.Kubectl(ctx, "", "delete", "--ignore-not-found", "-f", filepath.Join(ci, "admission.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"serviceaccount.yaml", "clusterrole.yaml", "clusterrolebinding.yaml"} {
		if _, err := h.Kubectl(ctx, "", "apply", "-f", filepath.Join(ci, f)); err != nil {
			t.Fatal(err)
		}
	}
	kc, err := h.KubeconfigAs(ctx, "af-ci", "af-ci", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// What the attempts need: a Secret in default to overwrite, a namespace that is not af's
	// and one that is, and a pod in kube-system to port-forward to.
	fixtures := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %s}
---
apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels: {dev.antifailure.managed: "true"}
---
apiVersion: v1
kind: Secret
metadata: {name: af-ci-check, namespace: default}
stringData: {value: the operator's}
`, unmanagedNS, managedNS)
	if _, err := h.Kubectl(ctx, fixtures, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, _ = h.Kubectl(c, fixtures, "delete", "--ignore-not-found", "--wait=false", "-f", "-")
	})
	target, err := h.Kubectl(ctx, "", "-n", "kube-system", "get", "pods", "-o", "jsonpath={.items[0].metadata.name}")
	if err != nil || target == "" {
		t.Fatalf("no pod in kube-system to port-forward to: %q %v", target, err)
	}
	as := func(ctx context.Context, kc, stdin string, args ...string) error {
		_, err := h.KubectlAs(ctx, kc, stdin, args...)
		return err
	}
	attempts := []attempt{
		{"a pod in kube-system", func(ctx context.Context, t *testing.T, h *testcluster.Handle, kc string) error {
			return as(ctx, kc, afShaped, dry("-n", "kube-system", "create", "-f", "-")...)
		}},
		{"a privileged hostPath pod in a namespace af does not manage", func(ctx context.Context, t *testing.T, h *testcluster.Handle, kc string) error {
			return as(ctx, kc, privileged, dry("-n", unmanagedNS, "create", "-f", "-")...)
		}},
		{"overwriting a Secret in default (server-side apply)", func(ctx context.Context, t *testing.T, h *testcluster.Handle, kc string) error {
			s := "apiVersion: v1\nkind: Secret\nmetadata: {name: af-ci-check, namespace: default}\nstringData: {value: af-ci's}\n"
			return as(ctx, kc, s, dry("apply", "--server-side", "--force-conflicts", "--field-manager", "af", "-f", "-")...)
		}},
		{"a patch of kube-system's coredns Deployment", func(ctx context.Context, t *testing.T, h *testcluster.Handle, kc string) error {
			return as(ctx, kc, "", dry("-n", "kube-system", "patch", "deployment", "coredns", "--type=merge", "-p", `{"spec":{"template":{"spec":{"containers":[{"name":"coredns","image":"evil"}]}}}}`)...)
		}},
		{"labelling kube-system as af's", func(ctx context.Context, t *testing.T, h *testcluster.Handle, kc string) error {
			return as(ctx, kc, "", dry("label", "namespace", "kube-system", "dev.antifailure.managed=true")...)
		}},
		{"deleting a namespace af does not manage", func(ctx context.Context, t *testing.T, h *testcluster.Handle, kc string) error {
			return as(ctx, kc, "", dry("delete", "namespace", unmanagedNS)...)
		}},
		{"a namespace without af's label", func(ctx context.Context, t *testing.T, h *testcluster.Handle, kc string) error {
			return as(ctx, kc, "", dry("create", "namespace", "af-ci-check-new")...)
		}},
		{"port-forward into kube-system", func(ctx context.Context, t *testing.T, h *testcluster.Handle, kc string) error {
			return portForward(ctx, h, kc, target)
		}},
		{"a patch of the kubernetes Service", func(ctx context.Context, t *testing.T, h *testcluster.Handle, kc string) error {
			return as(ctx, kc, "", dry("-n", "default", "patch", "service", "kubernetes", "--type=merge", "-p", `{"spec":{"ports":[{"name":"https","port":443,"targetPort":6444}]}}`)...)
		}},
		// In af's own namespaces the node stays out of reach too (af-ci could make one).
		{"a privileged hostPath pod in af's namespace", func(ctx context.Context, t *testing.T, h *testcluster.Handle, kc string) error {
			return as(ctx, kc, privileged, dry("-n", managedNS, "create", "-f", "-")...)
		}},
		{"removing af's label from its namespace", func(ctx context.Context, t *testing.T, h *testcluster.Handle, kc string) error {
			return as(ctx, kc, "", dry("label", "namespace", managedNS, "dev.antifailure.managed-")...)
		}},
	}
	for _, a := range attempts {
		if err := a.try(ctx, t, h, kc); err != nil {
			t.Errorf("control: with RBAC alone, %s was refused, so this test could not tell the policy's refusal: %v", a.name, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// The policies, as written; kc's token is the same identity.
	if _, err := h.Kubectl(ctx, "", "apply", "-f", ci); err != nil {
		t.Fatal(err)
	}
	if err := h.WaitCIPolicy(ctx, kc); err != nil {
		t.Fatal(err)
	}
	for _, a := range attempts {
		err := a.try(ctx, t, h, kc)
		switch {
		case err == nil:
			t.Errorf("%s: allowed with deploy/ci/admission.yaml applied", a.name)
		case !strings.Contains(err.Error(), testcluster.CIPolicy):
			t.Errorf("%s: refused, but not by deploy/ci's admission policy: %v", a.name, err)
		default:
			t.Logf("refused: %s", a.name)
		}
	}
	// What af itself does stays allowed: a namespace with its label, a pod of af's shape in
	// it, a label changed on it, and its deletion.
	ours := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: af-ci-check-new\n  labels: {dev.antifailure.managed: \"true\"}\n"
	for name, try := range map[string]func() error{
		"a namespace with af's label":           func() error { return as(ctx, kc, ours, dry("create", "-f", "-")...) },
		"a pod of af's shape in af's namespace": func() error { return as(ctx, kc, afShaped, dry("-n", managedNS, "create", "-f", "-")...) },
		"an annotation on af's namespace": func() error {
			return as(ctx, kc, "", dry("annotate", "namespace", managedNS, "dev.antifailure.probe=contained")...)
		},
		"deleting af's namespace":                func() error { return as(ctx, kc, "", dry("delete", "namespace", managedNS)...) },
		"asking what it may do (access reviews)": func() error { return as(ctx, kc, "", "auth", "can-i", "create", "pods", "-n", managedNS) },
	} {
		if err := try(); err != nil {
			t.Errorf("%s: refused with the policies applied: %v", name, err)
		}
	}
}

// portForward starts a port-forward to pod in kube-system as kc and returns its refusal, or
// nil once it is forwarding (then it is stopped: no connection is ever made through it).
func portForward(ctx context.Context, h *testcluster.Handle, kc, pod string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.BinDir+"/kubectl", "--kubeconfig", kc, "-n", "kube-system", "port-forward", "--address", "127.0.0.1", "pod/"+pod, ":53")
	var stderr strings.Builder // read only after Wait
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	// Its output is read to the end (the process ended, or was stopped) before Wait.
	forwarding, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "Forwarding from") {
				close(forwarding)
				_, _ = io.Copy(io.Discard, stdout)
				return
			}
		}
	}()
	select {
	case <-forwarding:
		cancel()
		<-ended
		_ = cmd.Wait()
		return nil
	case <-ended:
		err := cmd.Wait()
		if ctx.Err() != nil {
			return fmt.Errorf("port-forward neither forwarded nor ended in 30s: %s", stderr.String())
		}
		return fmt.Errorf("port-forward ended: %v: %s", err, stderr.String())
	}
}
