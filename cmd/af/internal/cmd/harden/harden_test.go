package harden

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/antifailure/af/harden"
)

// TestMetricsWaitForTheirPort holds the metrics port as a previous agent's pod would: the
// agent says so, listens again each period, and serves its metrics once the port is free.
func TestMetricsWaitForTheirPort(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := held.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var said []string
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		said = append(said, fmt.Sprintf(format, args...))
	}
	m := harden.NewMetrics()
	m.Observe(harden.Report{Node: "n1", Found: harden.Found{Enforcer: harden.KubeRouter}, At: time.Now()})
	stop := serveMetrics(ctx, addr, m, 50*time.Millisecond, logf)
	defer stop()

	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(said)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing said about the port being held")
		}
	}
	held.Close()
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		break
	}
	if !strings.Contains(body, `af_harden_enforcer{enforcer="kube-router"} 1`) {
		t.Fatalf("the metrics once the port was free: %q", body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(said) < 2 || !strings.Contains(said[0], "no metrics yet") || !strings.Contains(said[0], "the rules are kept all the same") || !strings.Contains(said[len(said)-1], "metrics at http://"+addr) {
		t.Errorf("what the agent said: %q", said)
	}
	for _, s := range said[1 : len(said)-1] {
		if strings.Contains(s, "no metrics yet") {
			t.Errorf("said again on a retry: %q", said)
		}
	}
}
