package testcluster_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/antifailure/af/testcluster"
)

// TestStartupWindow measures, with default-deny in place, how long a new pod's
// packets to the fake internet get through after its container starts. It
// prints the distribution and asserts no bound: the gate closes this window.
func TestStartupWindow(t *testing.T) {
	h := cluster(t)
	requireState(t, h, testcluster.StateEnforcing)
	runs := 10
	if n, err := strconv.Atoi(os.Getenv("AF_STARTUP_RUNS")); err == nil && n > 0 {
		runs = n
	}
	ns := namespace(t, h)
	mustKubectl(t, h, fmt.Sprintf(defaultDeny, ns), "apply", "-f", "-")
	clientPod(t, h, ns, "sentinel", nil)
	for _, r := range escapeRoutes(h)[:2] {
		waitRoute(t, h, ns, "sentinel", r, false)
	}
	summary := regexp.MustCompile(`SUMMARY (\w+) attempts=(\d+) ok=(\d+) last_ok_ms=(-?\d+)`)
	window := map[string][]int{}
	leaked := map[string]int{}
	for i := range runs {
		name := fmt.Sprintf("probe-%d", i)
		mustKubectl(t, h, fmt.Sprintf(probePod, name, ns, h.TestImage, h.Internet.PublicTCP, h.Internet.PublicUDP), "apply", "-f", "-")
		mustKubectl(t, h, "", "-n", ns, "wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/"+name, "--timeout=120s")
		logs := mustKubectl(t, h, "", "-n", ns, "logs", name)
		found := summary.FindAllStringSubmatch(logs, -1)
		if len(found) != 2 {
			t.Fatalf("run %d: want 2 SUMMARY lines, got %d:\n%s", i, len(found), logs)
		}
		for _, m := range found {
			last, _ := strconv.Atoi(m[4])
			ok, _ := strconv.Atoi(m[3])
			window[m[1]] = append(window[m[1]], last)
			if ok > 0 {
				leaked[m[1]]++
			}
			t.Logf("run %d %s: %s of %s attempts got through, last at %s ms after container start", i, m[1], m[3], m[2], m[4])
		}
		mustKubectl(t, h, "", "-n", ns, "delete", "pod", name, "--wait=false")
	}
	for _, proto := range []string{"tcp", "udp"} {
		v := slices.Clone(window[proto])
		slices.Sort(v)
		var s []string
		for _, x := range v {
			s = append(s, strconv.Itoa(x))
		}
		t.Logf("STARTUP WINDOW %s (ms after container start of the last packet through; -1 = none): runs=%d leaked=%d min=%d median=%d max=%d all=[%s]",
			proto, len(v), leaked[proto], v[0], v[len(v)/2], v[len(v)-1], strings.Join(s, " "))
	}
}

const probePod = `apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: probe
    image: %s
    imagePullPolicy: Never
    command: [aftool, probe, -tcp, %s, -udp, %s, -interval, 50ms, -timeout, 150ms, -for, 2500ms]
`
