package node

import (
	"encoding/json"
	"testing"
)

func TestHolesOneAtATime(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Holes
		err  bool
	}{
		{"ipv6", Holes{IPv6: true}, false},
		{"nodeport", Holes{Node: true}, false},
		{"node", Holes{Node: true}, false},
		{"all", Holes{IPv6: true, Node: true}, false},
		{"", Holes{IPv6: true, Node: true}, false},
		{"sctp", Holes{}, true},
	} {
		got, err := ParseHoles(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseHoles(%q) = %+v, %v", c.in, got, err)
		}
	}
	// The state's record: each hole alone, both, and a state written before the two were
	// told apart (holes alone: both open).
	for _, c := range []struct {
		state string
		want  Holes
	}{
		{`{"enforcer":"kube-router","holes":true}`, Holes{IPv6: true, Node: true}},
		{`{"enforcer":"kube-router","holes":true,"hole_node":true}`, Holes{Node: true}},
		{`{"enforcer":"kube-router","holes":true,"hole_ipv6":true}`, Holes{IPv6: true}},
		{`{"enforcer":"kube-router"}`, Holes{}},
	} {
		var st State
		if err := json.Unmarshal([]byte(c.state), &st); err != nil {
			t.Fatal(err)
		}
		if got := st.OpenHoles(); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.state, got, c.want)
		}
		st.setHoles(c.want)
		if st.OpenHoles() != c.want || st.Holes != c.want.Any() {
			t.Errorf("%s: set and read back %+v", c.state, st)
		}
	}
}
