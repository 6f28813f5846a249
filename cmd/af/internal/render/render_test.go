package render

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/antifailure/af/gate"
	afruntime "github.com/antifailure/af/runtime"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/af/internal/render -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s:\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

func contained() *gate.Result {
	return &gate.Result{Verdict: gate.Contained, Rounds: 3, MS: 4405.2, Routes: []gate.Attempt{
		{Route: gate.RouteTCP, Target: "198.51.100.10:80", Outcome: gate.Denied, Detail: "timeout", MS: 1000.6},
		{Route: gate.RouteDNS, Target: "198.51.100.53:53", Outcome: gate.Denied, Detail: "connection refused", MS: 752.3},
		{Route: gate.RouteMetadata, Target: "169.254.77.1:80", Outcome: gate.Denied, Detail: "timeout", MS: 1000.6},
		{Route: gate.RouteAPIServer, Target: "10.96.0.1:443", Outcome: gate.Denied, Detail: "connection refused", MS: 0.3},
		{Route: gate.RouteLinkLocal, Target: "ff02::1+neighbours", Outcome: gate.Denied, Detail: "IPv6 disabled on eth0", MS: 0.1},
		{Route: gate.RouteNode, Target: "10.244.0.1:10250", Outcome: gate.Denied, Detail: "timeout", MS: 1000.5},
		{Route: gate.RouteNode, Target: "10.244.0.1:30999/udp", Outcome: gate.Denied, Detail: "connection refused", MS: 752.3},
	}}
}

func TestGolden(t *testing.T) {
	exit := 3
	services := []afruntime.ServiceStatus{
		{Name: "web", Ready: 2, Desired: 2, CPU: "100m", Memory: "64Mi", State: afruntime.StateRunning, URL: "http://shop-pr-1-web.preview.af.test/"},
		{Name: "worker", Ready: 0, Desired: 1, State: afruntime.StateFailed, ExitCode: &exit, Reason: "CrashLoopBackOff"},
	}
	escaped := &gate.Result{Verdict: gate.Escape, Rounds: 52, MS: 60012, Routes: []gate.Attempt{
		{Route: gate.RouteTCP, Target: "198.51.100.10:80", Outcome: gate.Denied, Detail: "timeout", MS: 1000},
		{Route: gate.RouteLinkLocal, Target: "ff02::1+neighbours", Outcome: gate.Escaped, Detail: "fe80::1%eth0 answered a DNS query to ff02::1%eth0", MS: 2},
		{Route: gate.RouteNode, Target: "10.244.0.1:30999", Outcome: gate.Escaped, Detail: "answered", MS: 0.4},
	}, Escaped: []gate.Attempt{
		{Route: gate.RouteLinkLocal, Target: "ff02::1+neighbours", Outcome: gate.Escaped, Detail: "fe80::1%eth0 answered a DNS query to ff02::1%eth0"},
		{Route: gate.RouteNode, Target: "10.244.0.1:30999", Outcome: gate.Escaped, Detail: "answered"},
	}}
	noAnswer := &gate.Result{Verdict: gate.CannotAnswer, Rounds: 40, MS: 60000, Reason: "no 3 consecutive all-denied rounds within 1m0s: the sidecar did not answer before the round: dial tcp 10.96.5.5:3128: i/o timeout"}
	expires := time.Date(2026, 12, 2, 9, 30, 0, 0, time.UTC)
	for name, write := range map[string]func(*bytes.Buffer){
		"up-contained": func(b *bytes.Buffer) {
			Result(b, &afruntime.Result{Probe: contained(), Services: services, URLs: map[string]string{"web": "http://shop-pr-1-web.preview.af.test/"}})
		},
		"up-no-domain":   func(b *bytes.Buffer) { Result(b, &afruntime.Result{Probe: contained(), Services: services[:1]}) },
		"probe-escaped":  func(b *bytes.Buffer) { Probe(b, escaped) },
		"probe-noanswer": func(b *bytes.Buffer) { Probe(b, noAnswer) },
		"status-running": func(b *bytes.Buffer) {
			Status(b, &afruntime.Status{Environment: "shop-pr-1", Namespace: "af-env-shop-pr-1", Exists: true, ExpiresAt: &expires, Probe: contained(), Services: services,
				Quota: &afruntime.Quota{Pods: afruntime.QuotaFigure{Used: "5", Hard: "14"}, CPU: afruntime.QuotaFigure{Used: "1300m", Hard: "14"},
					Memory: afruntime.QuotaFigure{Used: "1600Mi", Hard: "15Gi"}}})
		},
		"status-escaped-after-start": func(b *bytes.Buffer) {
			at := time.Date(2026, 12, 4, 15, 2, 3, 0, time.UTC)
			Status(b, &afruntime.Status{Environment: "shop-pr-1", Namespace: "af-env-shop-pr-1", Exists: true, ExpiresAt: &expires, Probe: contained(), Services: services,
				Watch: &afruntime.Watch{State: gate.Escape, EverySeconds: 60, At: &at,
					Detail: "NOT CONTAINED: at 2026-12-04T15:02:03Z the probe got out by tcp-public (198.51.100.10:443); the services keep running: find what changed on the cluster (its NetworkPolicy enforcer, the namespace's policies), or remove the environment with `af down`"}})
		},
		"status-no-verdict": func(b *bytes.Buffer) {
			Status(b, &afruntime.Status{Environment: "shop-pr-1", Namespace: "af-env-shop-pr-1", Exists: true, Services: services})
		},
		"status-absent": func(b *bytes.Buffer) {
			Status(b, &afruntime.Status{Environment: "shop-pr-9", Namespace: "af-env-shop-pr-9"})
		},
	} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			write(&b)
			golden(t, name, b.Bytes())
		})
	}
}
