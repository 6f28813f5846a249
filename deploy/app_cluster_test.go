package deploy_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/github/delivery"
	"github.com/antifailure/af/testcluster"
)

// TestAppAsShipped: deploy/app applied as docs/github.md says (rbac.yaml, the Secret made from
// the App's files, deployment.yaml as written, its image made locally by the name it names):
// both replicas become Ready, and through its Service a signed delivery is accepted and an
// unsigned one refused.
func TestAppAsShipped(t *testing.T) {
	h := testcluster.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	shipped, _ := asShipped(t, ctx, h, filepath.Join("app", "deployment.yaml"))
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		_, _ = h.Kubectl(c, "", "delete", "--ignore-not-found", "--wait=true", "-f", shipped)
		_, _ = h.Kubectl(c, "", "delete", "--ignore-not-found", "--wait=true", "-f", filepath.Join("app", "rbac.yaml"))
	})
	if _, err := h.Kubectl(ctx, "", "apply", "-f", filepath.Join("app", "rbac.yaml")); err != nil {
		t.Fatal(err)
	}
	// The Secret, as the page makes it: the App's id, its private key file, the webhook secret.
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "my-af-app.private-key.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "a-webhook-secret-for-the-shipped-app"
	if _, err := h.Kubectl(ctx, "", "-n", "af-system", "delete", "secret", "af-app", "--ignore-not-found"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Kubectl(ctx, "", "-n", "af-system", "create", "secret", "generic", "af-app", "--from-literal=app-id=123456",
		"--from-file=private-key.pem="+keyFile, "--from-literal=webhook-secret="+secret); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Kubectl(ctx, "", "apply", "-f", shipped); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Kubectl(ctx, "", "-n", "af-system", "rollout", "status", "deployment/af-app", "--timeout=4m"); err != nil {
		logs, _ := h.Kubectl(ctx, "", "-n", "af-system", "logs", "-l", "app.kubernetes.io/name=af-app", "--tail=20", "--all-containers")
		pods, _ := h.Kubectl(ctx, "", "-n", "af-system", "get", "pods", "-o", "wide")
		t.Fatalf("the App as shipped did not become ready: %v\n%s\n%s", err, pods, logs)
	}
	ready, err := h.Kubectl(ctx, "", "-n", "af-system", "get", "deployment", "af-app", "-o", "jsonpath={.status.readyReplicas}/{.spec.replicas}")
	if err != nil || ready != "2/2" {
		t.Fatalf("ready replicas %q (%v), want 2/2", ready, err)
	}
	ip, err := h.Kubectl(ctx, "", "-n", "af-system", "get", "service", "af-app", "-o", "jsonpath={.spec.clusterIP}")
	if err != nil || ip == "" {
		t.Fatalf("the App's Service: %q %v", ip, err)
	}
	url := "http://" + ip + ":80/webhook"
	body := []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`)
	post := func(sig string) int {
		t.Helper()
		// The Service answers once kube-proxy has its rules: a refused connection is retried.
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-GitHub-Event", "ping")
			req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("shipped-%d", time.Now().UnixNano()))
			if sig != "" {
				req.Header.Set("X-Hub-Signature-256", sig)
			}
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				return resp.StatusCode
			}
			if time.Now().After(deadline) {
				t.Fatalf("POST %s: %v", url, err)
			}
		}
	}
	if got := post(delivery.Sign([]byte(secret), body)); got != http.StatusAccepted {
		t.Errorf("a signed ping through the Service: %d, want 202", got)
	}
	if got := post(""); got != http.StatusUnauthorized {
		t.Errorf("an unsigned delivery through the Service: %d, want 401", got)
	}
	if got := post(delivery.Sign([]byte("another secret"), body)); got != http.StatusUnauthorized {
		t.Errorf("a delivery signed with another secret: %d, want 401", got)
	}
	if logs, _ := h.Kubectl(ctx, "", "-n", "af-system", "logs", "-l", "app.kubernetes.io/name=af-app", "--tail=-1"); strings.Contains(logs, "permission denied") {
		t.Errorf("the App's logs say permission denied:\n%s", logs)
	}
}
