package node

import (
	"fmt"
	"path/filepath"
)

// writeKubeconfig writes a kubeconfig that authenticates with the certificate
// pki/<cert>.crt against the API server at server.
func writeKubeconfig(path, pkiDir, cert, server string) error {
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: af-testcluster
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: af-testcluster
  context:
    cluster: af-testcluster
    user: %s
current-context: af-testcluster
`, server, filepath.Join(pkiDir, "ca.crt"), cert, filepath.Join(pkiDir, cert+".crt"), filepath.Join(pkiDir, cert+".key"), cert)
	return writeFile(path, content, 0o600)
}
