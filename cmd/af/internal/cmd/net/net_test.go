package netcmd

import (
	"context"
	"encoding/json"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/cmd/af/internal/cmdtest"
	"github.com/antifailure/af/failure"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/runtime/runtimetest"
	"github.com/antifailure/af/sidecar/decisionlog"
)

func record(o *runtimetest.Observed, host string, allowed bool, mode string) {
	o.Log.Record(decisionlog.Entry{Via: "proxy", Method: "GET", Host: host, Port: 443, Rule: "rule-" + host, Mode: mode, Allowed: allowed, Status: map[bool]int{true: 200, false: 403}[allowed]})
}

func TestNetLog(t *testing.T) {
	o := runtimetest.NewObserved()
	record(o, "api.stripe.test", true, "allow")
	record(o, "evil.test", false, "block")
	record(o, "evil.test", false, "block")
	record(o, "hooks.stripe.test", true, "allow")
	record(o, "smtp.mail.test", true, "capture")

	r := cmdtest.Exec(t, cmdtest.Env{Runtime: o}, NewCmdNet, "log", "--env", "e")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	lines := strings.Split(strings.TrimSpace(r.Out), "\n")
	if len(lines) != 6 || !strings.Contains(lines[1], "block") || !strings.Contains(lines[1], "evil.test:443") || !strings.Contains(lines[1], "rule=rule-evil.test") {
		t.Fatalf("output:\n%s", r.Out)
	}
	if got := lines[5]; got != "2 allowed, 2 blocked, 1 captured; blocked most: evil.test (2)" {
		t.Fatalf("summary %q", got)
	}

	r = cmdtest.Exec(t, cmdtest.Env{Runtime: o, JSON: true}, NewCmdNet, "log", "--env", "e", "--host", "*.STRIPE.test")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	var hosts []string
	for _, l := range strings.Split(strings.TrimSpace(r.Out), "\n") {
		var e decisionlog.Entry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("not one JSON object per line: %q", l)
		}
		hosts = append(hosts, e.Host)
	}
	if strings.Join(hosts, ",") != "api.stripe.test,hooks.stripe.test" {
		t.Fatalf("--host: %v", hosts)
	}

	r = cmdtest.Exec(t, cmdtest.Env{Runtime: o}, NewCmdNet, "log", "--env", "e", "--blocked")
	if strings.Count(r.Out, "block ") != 2 || strings.Contains(r.Out, "allow ") {
		t.Fatalf("--blocked:\n%s", r.Out)
	}
	if n, _ := o.Links(); n != 0 {
		t.Fatalf("%d links left open", n)
	}

	for _, bad := range [][]string{{"--host", "[x"}, {"--since", "yesterday"}} {
		r := cmdtest.Exec(t, cmdtest.Env{Runtime: o}, NewCmdNet, append([]string{"log", "--env", "e"}, bad...)...)
		if e := failure.As(r.Err); e == nil || e.Entry != failure.UsageInvalid {
			t.Fatalf("%v: %v", bad, r.Err)
		}
	}
}

// A runtime that cannot reach a sidecar says so, naming itself.
func TestNetLogRefusedByRuntime(t *testing.T) {
	r := cmdtest.Exec(t, cmdtest.Env{Runtime: &runtimetest.Fake{}}, NewCmdNet, "log", "--env", "e")
	if e := failure.As(r.Err); e == nil || e.Entry != failure.RuntimeCannot || !strings.Contains(r.Err.Error(), "the fake runtime cannot") {
		t.Fatalf("%v", r.Err)
	}
}

// --follow prints a decision made after it started within a second, and Ctrl-C (the context
// ending) leaves no goroutine and no loopback listener behind.
func TestNetLogFollow(t *testing.T) {
	o := runtimetest.NewObserved()
	record(o, "before.test", true, "allow")
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan cmdtest.Run, 1)
	go func() {
		out <- cmdtest.Exec(t, cmdtest.Env{Runtime: o, Ctx: ctx}, NewCmdNet, "log", "--env", "e", "--follow")
	}()
	time.Sleep(500 * time.Millisecond)
	record(o, "after.test", false, "block")
	time.Sleep(time.Second) // within a second of being made it must be printed
	cancel()
	var r cmdtest.Run
	select {
	case r = <-out:
	case <-time.After(5 * time.Second):
		t.Fatal("--follow did not end when interrupted")
	}
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if !strings.Contains(r.Out, "after.test") || !strings.Contains(r.Out, "before.test") || strings.Count(r.Out, "before.test:443") != 1 {
		t.Fatalf("follow output:\n%s", r.Out)
	}
	n, addr := o.Links()
	if n != 0 {
		t.Fatal("the link is still open")
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("something still listens on %s", addr)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// The pod behind a decision is named from the client address the sidecar recorded: in the
// text line (from=SERVICE/POD) and as service and instance in JSON; an address no instance
// has is shown as it is.
func TestNetLogNamesTheClient(t *testing.T) {
	o := runtimetest.NewObserved()
	o.Pods = []afruntime.Instance{
		{Name: "shop-web-5c9d-x2", Service: "web", Workload: "service", Addresses: []string{"10.244.0.7"}},
		{Name: "shop-web-migrate-q", Service: "web", Workload: "migration", Addresses: []string{"10.244.0.9"}},
		{Name: "af-probe", Workload: "probe", Addresses: []string{"10.244.0.11"}},
	}
	for _, c := range []struct{ host, client string }{{"a.test", "10.244.0.7"}, {"b.test", "10.244.0.9"}, {"c.test", "10.244.0.11"}, {"d.test", "10.244.0.99"}, {"e.test", ""}} {
		o.Log.Record(decisionlog.Entry{Via: "proxy", Client: c.client, Method: "GET", Host: c.host, Rule: "egress.default", Mode: "block"})
	}
	r := cmdtest.Exec(t, cmdtest.Env{Runtime: o}, NewCmdNet, "log", "--env", "e")
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	lines := strings.Split(r.Out, "\n")
	for i, want := range []string{"from=web/shop-web-5c9d-x2", "from=web (migration)/shop-web-migrate-q", "from=probe/af-probe", "from=10.244.0.99"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("line %d lacks %q: %s", i, want, lines[i])
		}
	}
	if strings.Contains(lines[4], "from=") {
		t.Errorf("a decision without a client names one: %s", lines[4])
	}
	// One answer from the runtime served every known address; the unknown one asked once more
	// only after RefreshEvery, which has not passed.
	var asked int
	for _, c := range o.Calls() {
		if c.Method == "Instances" {
			asked++
		}
	}
	if asked != 1 {
		t.Errorf("asked the runtime for its instances %d times, want 1", asked)
	}
	r = cmdtest.Exec(t, cmdtest.Env{Runtime: o, JSON: true}, NewCmdNet, "log", "--env", "e", "--host", "a.test")
	var e decisionlog.Entry
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.Out)), &e); err != nil || e.Service != "web" || e.Instance != "shop-web-5c9d-x2" || e.Client != "10.244.0.7" {
		t.Errorf("JSON: %v %s", err, r.Out)
	}
}
