package gate

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// TestHoldWaitsForRelease: the hold does not return while its address refuses, and returns
// once something accepts there; a context that ends first is an error, never a release.
func TestHoldWaitsForRelease(t *testing.T) {
	addr := closedPort(t)

	var out bytes.Buffer
	released := make(chan error, 1)
	go func() {
		_, err := Hold(context.Background(), HoldConfig{Addr: addr, Every: 20 * time.Millisecond, Report: 100 * time.Millisecond, Out: &out})
		released <- err
	}()
	select {
	case err := <-released:
		t.Fatalf("released while the address refused (err %v)", err)
	case <-time.After(400 * time.Millisecond):
	}
	opened := time.Now()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the port the test had found free was taken meanwhile by another process: %v", err)
	}
	defer l.Close()
	acceptAndClose(l)
	select {
	case err := <-released:
		if err != nil {
			t.Fatalf("hold: %v", err)
		}
		t.Logf("released %v after the address opened", time.Since(opened))
	case <-time.After(5 * time.Second):
		t.Fatal("not released 5 s after the address opened")
	}
	log := out.String()
	for _, want := range []string{"waiting until af releases", "still closed", "released after"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

func TestHoldEndsWithItsContext(t *testing.T) {
	addr := closedPort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := Hold(ctx, HoldConfig{Addr: addr, Every: 20 * time.Millisecond}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hold with an ended context: %v, want the context's error", err)
	}
	if _, err := Hold(context.Background(), HoldConfig{Addr: "nowhere"}); err == nil {
		t.Fatal("a hold address without a port was accepted")
	}
}

// closedPort is a loopback port nothing listens on (taken, then given back): connections to it
// are refused.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
