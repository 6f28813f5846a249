package main

import (
	"context"
	"net"
	"slices"
	"testing"
)

func TestCandidatesFollowSearchAndNdots(t *testing.T) {
	c := resolvConf{search: []string{"ns.svc.cluster.local", "svc.cluster.local"}, ndots: 5}
	if got, want := c.candidates("echo"), []string{"echo.ns.svc.cluster.local", "echo.svc.cluster.local", "echo"}; !slices.Equal(got, want) {
		t.Errorf("candidates(echo) = %v, want %v", got, want)
	}
	if got, want := c.candidates("a.b.c.d.e.f"), []string{"a.b.c.d.e.f", "a.b.c.d.e.f.ns.svc.cluster.local", "a.b.c.d.e.f.svc.cluster.local"}; !slices.Equal(got, want) {
		t.Errorf("candidates(many dots) = %v, want %v", got, want)
	}
	if got, want := c.candidates("x.test."), []string{"x.test."}; !slices.Equal(got, want) {
		t.Errorf("candidates(absolute) = %v, want %v", got, want)
	}
}

func TestConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := connect(context.Background(), []string{"-timeout", "2s", addr}); err != nil {
		t.Errorf("connect to a listening port: %v", err)
	}
	ln.Close()
	if err := connect(context.Background(), []string{"-timeout", "2s", addr}); err == nil {
		t.Error("connect to a closed port succeeded")
	}
}
