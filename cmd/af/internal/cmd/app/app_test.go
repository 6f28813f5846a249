package appcmd

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/antifailure/af/cmd/af/internal/cmdtest"
	"github.com/antifailure/af/failure"
)

// af app serve refuses to start, naming what to set, before it listens or asks the cluster.
func TestServeRefusesBadConfiguration(t *testing.T) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	kube := filepath.Join(dir, "none.kubeconfig") // never read: each case fails before the App asks the cluster
	for _, c := range []struct {
		name string
		vars map[string]string
		args []string
		code *failure.Entry
		says string
	}{
		{"no App id", map[string]string{"AF_APP_WEBHOOK_SECRET": "s"}, nil, failure.AppConfigInvalid, "AF_APP_ID"},
		{"no private key", map[string]string{"AF_APP_ID": "1", "AF_APP_WEBHOOK_SECRET": "s"}, nil, failure.AppConfigInvalid, "private key"},
		{"a key that does not parse", map[string]string{"AF_APP_ID": "1", "AF_APP_PRIVATE_KEY_FILE": bad, "AF_APP_WEBHOOK_SECRET": "s"}, nil, failure.AppConfigInvalid, "private key"},
		{"no webhook secret", map[string]string{"AF_APP_ID": "1", "AF_APP_PRIVATE_KEY_FILE": keyFile, "KUBECONFIG": kube}, nil, failure.AppConfigInvalid, "webhook secret"},
		{"a journal namespace that is not one", map[string]string{"AF_APP_ID": "1", "AF_APP_PRIVATE_KEY_FILE": keyFile, "AF_APP_WEBHOOK_SECRET": "s", "AF_APP_NAMESPACE": "Not_A_Namespace"}, nil, failure.AppConfigInvalid, "AF_APP_NAMESPACE"},
		{"an in-flight limit out of range", map[string]string{"AF_APP_ID": "1", "AF_APP_PRIVATE_KEY_FILE": keyFile, "AF_APP_WEBHOOK_SECRET": "s", "AF_APP_MAX_IN_FLIGHT": "65"}, nil, failure.AppConfigInvalid, "AF_APP_MAX_IN_FLIGHT"},
		{"a management address af cannot listen on", map[string]string{"AF_APP_ID": "1", "AF_APP_PRIVATE_KEY_FILE": keyFile, "AF_APP_WEBHOOK_SECRET": "s", "KUBECONFIG": kube,
			"AF_APP_LISTEN": "127.0.0.1:0", "AF_APP_MANAGE_LISTEN": "256.0.0.1:8081"}, nil, failure.AppConfigInvalid, "AF_APP_MANAGE_LISTEN"},
		{"a webhook address af cannot listen on", map[string]string{"AF_APP_ID": "1", "AF_APP_PRIVATE_KEY_FILE": keyFile, "AF_APP_WEBHOOK_SECRET": "s", "KUBECONFIG": kube,
			"AF_APP_LISTEN": "256.0.0.1:8080", "AF_APP_MANAGE_LISTEN": "127.0.0.1:0"}, nil, failure.AppConfigInvalid, "AF_APP_LISTEN"},
		{"a log format af does not write", map[string]string{"AF_APP_ID": "1", "AF_APP_PRIVATE_KEY_FILE": keyFile, "AF_APP_WEBHOOK_SECRET": "s"}, []string{"--log-format", "xml"}, failure.UsageInvalid, "json or text"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := cmdtest.Exec(t, cmdtest.Env{Vars: c.vars}, NewCmdApp, append([]string{"serve"}, c.args...)...)
			if failure.CodeOf(r.Err) != c.code.Code || !strings.Contains(r.Err.Error(), c.says) {
				t.Fatalf("%v, want %s saying %q", r.Err, c.code.Code, c.says)
			}
		})
	}
}
