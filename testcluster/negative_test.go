package testcluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/antifailure/af/testcluster"
)

// TestNegativeControl runs on a cluster started with ENFORCER=none: the same
// default-deny policy that TestEnforce shows blocking must block nothing here.
// It proves the enforcement checks can tell the two apart.
func TestNegativeControl(t *testing.T) {
	h := cluster(t)
	requireState(t, h, testcluster.StateNoEnforcer)
	ns := namespace(t, h)
	serverIP := serverPod(t, h, ns, "server", map[string]string{"app": "server"})
	clientPod(t, h, ns, "client", map[string]string{"app": "client"})
	routes := append(podRoutes(serverIP), escapeRoutes(h)...)
	for _, r := range routes {
		waitRoute(t, h, ns, "client", r, true)
	}
	mustKubectl(t, h, fmt.Sprintf(defaultDeny, ns), "apply", "-f", "-")
	// Give a (missing) enforcer the time kube-router needs here, then check
	// repeatedly that every route still works.
	time.Sleep(5 * time.Second)
	for _, r := range routes {
		stillOpen(t, h, ns, "client", r, 3)
	}
	if out := mustKubectl(t, h, "", "-n", ns, "get", "networkpolicy", "default-deny", "-o", "name"); out == "" {
		t.Fatal("the default-deny policy is not there")
	}
}
