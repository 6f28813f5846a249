package fakenet

import (
	"context"
	"log"
	"net"
	"testing"
	"time"
)

func TestAnswerKnownAndUnknownNames(t *testing.T) {
	hosts := map[string]string{"allowed-api.af.test": "198.51.100.80"}
	got, err := ParseAnswer(7, answer(Query(7, "Allowed-API.af.test."), hosts))
	if err != nil {
		t.Fatalf("known name: %v", err)
	}
	if len(got) != 1 || got[0].String() != "198.51.100.80" {
		t.Fatalf("known name answered %v, want [198.51.100.80]", got)
	}
	if _, err := ParseAnswer(8, answer(Query(8, "other.af.test"), hosts)); err == nil {
		t.Fatal("unknown name: want an NXDOMAIN error, got an answer")
	}
	if resp := answer([]byte{1, 2, 3}, hosts); resp != nil {
		t.Fatalf("garbage: want no answer, got %x", resp)
	}
}

func TestServeDNSAndEchoOnLoopback(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := freeAddr(t)
	go func() { _ = ServeDNS(ctx, addr, map[string]string{"public.af.test": "198.51.100.10"}, log.Default()) }()
	var got []string
	for range 50 {
		addrs, err := Resolve(ctx, addr, "public.af.test", time.Second)
		if err == nil {
			for _, a := range addrs {
				got = append(got, a.String())
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(got) != 1 || got[0] != "198.51.100.10" {
		t.Fatalf("resolved %v, want [198.51.100.10]", got)
	}
	echo := freeAddr(t)
	go func() { _ = ServeTCPEcho(ctx, echo, nil) }()
	go func() { _ = ServeUDPEcho(ctx, echo, nil) }()
	var err error
	for range 50 {
		if err = TCPEcho(ctx, echo, time.Second); err == nil {
			err = UDPEcho(ctx, echo, time.Second)
		}
		if err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("echo: %v", err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return pc.LocalAddr().String()
}
