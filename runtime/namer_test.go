package runtime_test

import (
	"context"
	"testing"
	"time"

	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/runtime/runtimetest"
)

// A replacement pod (an address first seen after the instances were read) is named once
// RefreshEvery has passed, and unknown addresses do not make af ask more often than that.
func TestNamerRefreshesForNewAddresses(t *testing.T) {
	o := runtimetest.NewObserved()
	o.Pods = []afruntime.Instance{{Name: "web-1", Service: "web", Workload: "service", Addresses: []string{"10.0.0.1"}}}
	now := time.Unix(1000, 0)
	n := afruntime.NewNamer(o, afruntime.Ref{ID: "e"})
	afruntime.SetNow(n, func() time.Time { return now })
	who := func(addr string) string {
		s, i := n.Name(context.Background(), addr)
		return s + "/" + i
	}
	asked := func() int {
		k := 0
		for _, c := range o.Calls() {
			if c.Method == "Instances" {
				k++
			}
		}
		return k
	}
	if got := who("10.0.0.1"); got != "web/web-1" {
		t.Fatalf("known: %q", got)
	}
	o.SetPods(append(o.Pods, afruntime.Instance{Name: "web-2", Service: "web", Workload: "service", Addresses: []string{"10.0.0.2"}}))
	for range 5 {
		if got := who("10.0.0.2"); got != "/" {
			t.Fatalf("named before a refresh was due: %q", got)
		}
	}
	if asked() != 1 {
		t.Fatalf("asked %d times within RefreshEvery", asked())
	}
	now = now.Add(afruntime.RefreshEvery)
	if got := who("10.0.0.2"); got != "web/web-2" {
		t.Fatalf("replacement pod after a refresh: %q", got)
	}
	if got := who("10.0.0.1"); got != "web/web-1" || asked() != 2 {
		t.Fatalf("known after refresh: %q, asked %d", got, asked())
	}
}

func TestWho(t *testing.T) {
	ins := []afruntime.Instance{
		{Name: "web-1", Service: "web", Workload: "service", Addresses: []string{"10.0.0.1", "fd00::1"}},
		{Name: "web-m", Service: "web", Workload: "migration", Addresses: []string{"10.0.0.2"}},
		{Name: "af-sidecar-x", Workload: "sidecar", Addresses: []string{"10.0.0.3"}},
	}
	for _, c := range []struct{ addr, service, name string }{
		{"10.0.0.1", "web", "web-1"}, {"fd00::1", "web", "web-1"}, {"10.0.0.2", "web (migration)", "web-m"},
		{"10.0.0.3", "sidecar", "af-sidecar-x"}, {"10.0.0.9", "", ""}, {"", "", ""},
	} {
		if s, n := afruntime.Who(ins, c.addr); s != c.service || n != c.name {
			t.Errorf("Who(%q) = %q, %q; want %q, %q", c.addr, s, n, c.service, c.name)
		}
	}
}
