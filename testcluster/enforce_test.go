package testcluster_test

import (
	"fmt"
	"net"
	"testing"

	"github.com/antifailure/af/testcluster"
)

// requireState fails the test unless the running cluster, read off the machine, is in the
// state it needs (make test-cluster and make test run each test where it is).
func requireState(t *testing.T, h *testcluster.Handle, want testcluster.State) {
	t.Helper()
	h.RequireState(t, want)
}

func TestEnforce(t *testing.T) {
	h := cluster(t)
	requireState(t, h, testcluster.StateEnforcing)
	ns := namespace(t, h)
	serverIP := serverPod(t, h, ns, "server", map[string]string{"app": "server"})
	clientPod(t, h, ns, "client", map[string]string{"app": "client"})
	routes := append(podRoutes(serverIP), escapeRoutes(h)...)

	t.Run("open before any policy", func(t *testing.T) {
		for _, r := range routes {
			waitRoute(t, h, ns, "client", r, true)
		}
	})
	t.Run("default-deny blocks every route", func(t *testing.T) {
		mustKubectl(t, h, fmt.Sprintf(defaultDeny, ns), "apply", "-f", "-")
		for _, r := range routes {
			waitRoute(t, h, ns, "client", r, false)
		}
	})
	t.Run("deleting the policy restores every route", func(t *testing.T) {
		mustKubectl(t, h, "", "-n", ns, "delete", "networkpolicy", "default-deny")
		for _, r := range routes {
			waitRoute(t, h, ns, "client", r, true)
		}
	})
	t.Run("a selective policy allows exactly what it says", func(t *testing.T) {
		publicIP, _, err := net.SplitHostPort(h.Internet.PublicTCP)
		if err != nil {
			t.Fatal(err)
		}
		mustKubectl(t, h, fmt.Sprintf(defaultDeny, ns)+"---\n"+fmt.Sprintf(selective, ns, publicIP), "apply", "-f", "-")
		open := map[string]bool{"pod TCP": true, "public TCP": true}
		for _, r := range routes {
			waitRoute(t, h, ns, "client", r, open[r.name])
		}
		// The allowed public address only on TCP 80: the allowed API host's
		// address is outside the policy's ipBlock.
		waitRoute(t, h, ns, "client", route{"other public address", []string{"aftool", "http", "-timeout", "2s", "http://" + h.Internet.AllowedAPIIP + "/"}, "af-fake-internet"}, false)
	})
}

// selective lets the client reach the server on TCP 8080 (not UDP 8081) and
// the public address on TCP 80 (not UDP 7); nothing else.
const selective = `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: client-egress
  namespace: %[1]s
spec:
  podSelector:
    matchLabels: {app: client}
  policyTypes: [Egress]
  egress:
  - to:
    - podSelector:
        matchLabels: {app: server}
    ports:
    - {protocol: TCP, port: 8080}
  - to:
    - ipBlock: {cidr: %[2]s/32}
    ports:
    - {protocol: TCP, port: 80}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: server-ingress
  namespace: %[1]s
spec:
  podSelector:
    matchLabels: {app: server}
  policyTypes: [Ingress]
  ingress:
  - from:
    - podSelector:
        matchLabels: {app: client}
    ports:
    - {protocol: TCP, port: 8080}
    - {protocol: UDP, port: 8081}
`
