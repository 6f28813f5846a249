package main

import (
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
