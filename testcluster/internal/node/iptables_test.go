package node

import (
	"strings"
	"testing"
)

func TestJumpsToOurs(t *testing.T) {
	for line, want := range map[string]bool{
		`-A FORWARD -m comment --comment "kube-router netpol" -j KUBE-ROUTER-FORWARD`:      true,
		`-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`: true,
		`-A FORWARD -i docker0 -j ACCEPT`:                                                  false,
		`-A INPUT -m set --match-set KUBE-SRC-X src -j ACCEPT`:                             false,
	} {
		if got := jumpsTo(strings.Fields(line), isOurChain); got != want {
			t.Errorf("jumpsTo(%q) = %t, want %t", line, got, want)
		}
	}
}

func TestHasRule(t *testing.T) {
	empty := "table ip filter { # handle 3\n\tchain INPUT { # handle 1\n\t\ttype filter hook input priority filter; policy accept;\n\t}\n}\n"
	if hasRule(empty) {
		t.Error("an empty table has no rule")
	}
	full := "table ip filter { # handle 3\n\tchain INPUT { # handle 1\n\t\ttype filter hook input priority filter; policy accept;\n\t\tcounter packets 0 bytes 0 accept # handle 5\n\t}\n}\n"
	if !hasRule(full) {
		t.Error("a table with a rule has one")
	}
}
