package testcluster_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/testcluster/internal/layout"
)

func TestSmoke(t *testing.T) {
	h := cluster(t)
	ns := namespace(t, h)
	serverIP := serverPod(t, h, ns, "server", map[string]string{"app": "server"})
	clientPod(t, h, ns, "client", map[string]string{"app": "client"})

	t.Run("pod runs from a local image and kubectl exec works", func(t *testing.T) {
		out := mustExec(t, h, ns, "client", "sh", "-c", "echo af-$((20+22))")
		if strings.TrimSpace(out) != "af-42" {
			t.Fatalf("exec printed %q, want af-42", out)
		}
	})

	mustKubectl(t, h, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: echo, namespace: %s}
spec:
  selector: {app: server}
  ports:
  - {name: tcp, port: 80, targetPort: 8080, protocol: TCP}
  - {name: udp, port: 81, targetPort: 8081, protocol: UDP}
`, ns), "apply", "-f", "-")
	clusterIP := strings.TrimSpace(mustKubectl(t, h, "", "-n", ns, "get", "service", "echo", "-o", "jsonpath={.spec.clusterIP}"))

	t.Run("ClusterIP service over TCP and UDP", func(t *testing.T) {
		for _, r := range []route{
			{"ClusterIP TCP", []string{"aftool", "tcp", clusterIP + ":80"}, "ok"},
			{"ClusterIP UDP", []string{"aftool", "udp", clusterIP + ":81"}, "ok"},
			{"pod IP TCP", []string{"aftool", "tcp", serverIP + ":8080"}, "ok"},
		} {
			waitRoute(t, h, ns, "client", r, true)
		}
	})

	t.Run("service names resolve through CoreDNS", func(t *testing.T) {
		out := mustExec(t, h, ns, "client", "aftool", "dns", "echo."+ns+".svc.cluster.local")
		if strings.TrimSpace(out) != clusterIP {
			t.Fatalf("echo.%s resolved to %q, want %s", ns, out, clusterIP)
		}
		out = mustExec(t, h, ns, "client", "aftool", "dns", "echo")
		if strings.TrimSpace(out) != clusterIP {
			t.Fatalf("short name echo resolved to %q, want %s (search path)", out, clusterIP)
		}
		out = mustExec(t, h, ns, "client", "aftool", "dns", h.Internet.AllowedAPIHost)
		if strings.TrimSpace(out) != h.Internet.AllowedAPIIP {
			t.Fatalf("%s resolved through CoreDNS to %q, want %s (forwarded to the fake resolver)", h.Internet.AllowedAPIHost, out, h.Internet.AllowedAPIIP)
		}
	})

	t.Run("image pushed to the local registry is pulled and run", func(t *testing.T) {
		dir := t.TempDir()
		tag := fmt.Sprintf("%08x", rand.Uint32())
		ref := "af.test/pushed:" + tag
		archive := filepath.Join(dir, "pushed.tar")
		if err := h.WriteTestImage(ctxFor(t, time.Minute), archive, ref, "AF_PUSHED="+tag); err != nil {
			t.Fatal(err)
		}
		remote, err := h.PushImage(ctxFor(t, 2*time.Minute), archive, ref, "af/pushed:"+tag)
		if err != nil {
			t.Fatal(err)
		}
		applyPod(t, h, ns, "pulled", remote, "Always", nil, []string{"sleep", "3600"}, false)
		if out := mustExec(t, h, ns, "pulled", "sh", "-c", "echo $AF_PUSHED"); strings.TrimSpace(out) != tag {
			t.Fatalf("pulled pod has AF_PUSHED=%q, want %s", out, tag)
		}
		events := mustKubectl(t, h, "", "-n", ns, "get", "events", "--field-selector", "involvedObject.name=pulled,reason=Pulled", "-o", "jsonpath={.items[*].message}")
		if !strings.Contains(events, "Successfully pulled") {
			t.Fatalf("no 'Successfully pulled' event for the pod (events: %q): the image was not pulled from the registry", events)
		}
		t.Logf("pulled %s: %s", remote, events)
	})

	t.Run("without policies a pod reaches every fake-internet host and the fake metadata host", func(t *testing.T) {
		in := h.Internet
		routes := append(escapeRoutes(h),
			route{"HTTP allowed API by name", []string{"aftool", "http", "http://" + in.AllowedAPIHost + "/v1"}, "af-fake-internet allowed-api"},
			route{"HTTPS allowed API by name", []string{"aftool", "http", "https://" + in.AllowedAPIHost + "/v1"}, "af-fake-internet allowed-api"},
			route{"HTTP blocked API by name", []string{"aftool", "http", "http://" + in.BlockedAPIHost + "/v1"}, "af-fake-internet blocked-api"},
			route{"HTTPS blocked API by name", []string{"aftool", "http", "https://" + in.BlockedAPIHost + "/v1"}, "af-fake-internet blocked-api"},
		)
		for _, r := range routes {
			waitRoute(t, h, ns, "client", r, true)
		}
	})

	// The bridge's MAC is set when it is made, so the kernel never takes a port's instead: a
	// pod's deletion cannot change the gateway every other pod has cached (docs/gate.md).
	t.Run("the pods' gateway keeps its MAC as pods come and go", func(t *testing.T) {
		read := func(f string) string {
			b, err := os.ReadFile(filepath.Join("/sys/class/net", layout.Bridge, f))
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimSpace(string(b))
		}
		// addr_assign_type 3: set from user space (0 would be permanent, 1 random: a bridge
		// made without an address follows its ports).
		if mac, kind := read("address"), read("addr_assign_type"); mac != layout.BridgeMAC || kind != "3" {
			t.Fatalf("the bridge's MAC is %s (addr_assign_type %s), want %s set at creation", mac, kind, layout.BridgeMAC)
		}
		mustExec(t, h, ns, "client", "aftool", "tcp", h.Internet.PublicTCP)
		arp := mustExec(t, h, ns, "client", "cat", "/proc/net/arp")
		if !strings.Contains(arp, layout.NodeIP+" ") || !strings.Contains(arp, layout.BridgeMAC) {
			t.Fatalf("the client's ARP cache has no %s at %s:\n%s", layout.NodeIP, layout.BridgeMAC, arp)
		}
	})
}
