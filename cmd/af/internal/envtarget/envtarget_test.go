package envtarget

import (
	"fmt"
	"testing"
)

func TestParseIngressController(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // "" for an error
	}{
		{"af-ingress/app.kubernetes.io/name=traefik", "af-ingress map[app.kubernetes.io/name:traefik]"},
		{"ingress-nginx/app=nginx,component=controller", "ingress-nginx map[app:nginx component:controller]"},
		{"ns/app=", "ns map[app:]"},
		{"no-selector", ""},
		{"/app=x", ""},
		{"ns/", ""},
		{"ns/app", ""},
		{"ns/=x", ""},
	} {
		ic, err := parseIngressController(c.in)
		got := ""
		if err == nil {
			got = fmt.Sprintf("%s %v", ic.Namespace, ic.Labels)
		}
		if got != c.want {
			t.Errorf("%q: got %q (%v), want %q", c.in, got, err, c.want)
		}
	}
}
