package sidecar

import (
	"context"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/antifailure/af/sidecar/config"
)

// TestShutdownLeavesNothingRunning holds a session on every listener, shuts down, and checks
// that every goroutine the sidecar started is gone.
func TestShutdownLeavesNothingRunning(t *testing.T) {
	before := runtime.NumGoroutine()
	cfg := config.Config{
		Environment: "leak", Namespace: "af-env-leak", ClusterResolver: "127.0.0.1:1", AdvertiseIPv4: "198.18.9.9",
		Listen: config.Listen{Proxy: "127.0.0.1:0", HTTP: "127.0.0.1:0", HTTPS: "127.0.0.1:0", DNS: "127.0.0.1:0", SMTP: []string{"127.0.0.1:0"}, Control: "127.0.0.1:0"},
	}
	res, err := cfg.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	sc, err := Start(context.Background(), res, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var open []net.Conn
	for _, name := range []string{Proxy, HTTP, HTTPS, SMTP} {
		c, err := net.Dial("tcp", sc.Addr(name).String())
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
	}
	if _, err := open[0].Write([]byte("GET http://x.test/ HTTP/1.1\r\nHost: x.test\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 12)
	if _, err := io.ReadFull(open[0], buf); err != nil || string(buf) != "HTTP/1.1 403" {
		t.Fatalf("%q %v", buf, err)
	}
	m := new(dns.Msg)
	m.SetQuestion("x.test.", dns.TypeA)
	if r, err := dns.Exchange(m, sc.Addr(DNS).String()); err != nil || len(r.Answer) != 1 {
		t.Fatalf("dns: %v %v", r, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := sc.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	for _, c := range open {
		c.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before, %d after shutdown:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
	// Listeners are closed: nothing accepts any more.
	if c, err := net.DialTimeout("tcp", sc.Addr(Proxy).String(), time.Second); err == nil {
		c.Close()
		t.Error("proxy port still accepting after shutdown")
	}
}
