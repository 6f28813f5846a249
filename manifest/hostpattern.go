package manifest

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// HostPattern is an egress rule's host: an exact name, "*." followed by a domain (one or more
// labels before it), or a name with "*" as whole labels elsewhere (exactly one label each).
// Matching is case-insensitive; a trailing dot on the host is ignored.
type HostPattern struct {
	raw string
	// anyPrefix is true for a leading "*.": one or more labels before the rest.
	anyPrefix bool
	// labels are the remaining labels, "*" meaning exactly one label.
	labels []string
}

// ParseHostPattern checks and parses a rule's host.
func ParseHostPattern(s string) (HostPattern, error) {
	p := HostPattern{raw: s}
	if s == "" {
		return p, errors.New("is empty")
	}
	if len(s) > 253 {
		return p, errors.New("is longer than 253 characters")
	}
	if s == "*" {
		return p, errors.New("alone is not a rule; set egress.default for hosts no rule names")
	}
	if strings.Contains(s, "://") || strings.ContainsAny(s, "/:?#@ ") {
		if _, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
			return p, errors.New("is an IP address; rules name hosts, because the sidecar decides by the name a client asks for")
		}
		return p, errors.New("is not a host name: write only the name, without scheme, port, path or spaces (ports go in ports)")
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return p, errors.New("is an IP address; rules name hosts, because the sidecar decides by the name a client asks for")
	}
	name := strings.ToLower(strings.TrimSuffix(s, "."))
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		p.anyPrefix = true
		name = rest
	}
	labels := strings.Split(name, ".")
	literal := 0
	for _, l := range labels {
		if l == "*" {
			continue
		}
		if err := checkLabel(l); err != nil {
			return p, err
		}
		literal++
	}
	if p.anyPrefix && literal < 2 {
		return p, errors.New("is too broad: a leading \"*.\" needs a domain of at least two labels after it")
	}
	if literal == 0 {
		return p, errors.New("has no literal label; set egress.default for hosts no rule names")
	}
	p.labels = labels
	return p, nil
}

func checkLabel(l string) error {
	if l == "" {
		return errors.New("has an empty label (two dots in a row, or a dot at the start)")
	}
	if len(l) > 63 {
		return fmt.Errorf("has a label longer than 63 characters (%q)", truncate(l, 20))
	}
	if strings.Contains(l, "*") {
		return fmt.Errorf("has %q: a '*' must be a whole label", l)
	}
	for i, r := range l {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' && i > 0 && i < len(l)-1
		if !ok {
			return fmt.Errorf("has %q, which is not a DNS label (letters, digits, '-' inside, '_')", l)
		}
	}
	return nil
}

// String returns the pattern as written.
func (p HostPattern) String() string { return p.raw }

// Match reports whether host is matched by the pattern.
func (p HostPattern) Match(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" || len(p.labels) == 0 {
		return false
	}
	hl := strings.Split(host, ".")
	for _, l := range hl {
		if l == "" {
			return false
		}
	}
	if p.anyPrefix {
		if len(hl) <= len(p.labels) {
			return false
		}
		hl = hl[len(hl)-len(p.labels):]
	} else if len(hl) != len(p.labels) {
		return false
	}
	for i, l := range p.labels {
		if l != "*" && l != hl[i] {
			return false
		}
	}
	return true
}

// Exact reports whether the pattern names one host.
func (p HostPattern) Exact() bool {
	if p.anyPrefix {
		return false
	}
	for _, l := range p.labels {
		if l == "*" {
			return false
		}
	}
	return true
}

// Literals counts the pattern's literal labels: more is more specific.
func (p HostPattern) Literals() int {
	n := 0
	for _, l := range p.labels {
		if l != "*" {
			n++
		}
	}
	return n
}

// ParseRange checks an egress rule's cidr: a valid prefix, not link-local or loopback (those
// are never reachable from an environment), no broader than a /8 (IPv6 /32).
func ParseRange(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, errors.New("is not an address range like 10.20.0.0/16")
	}
	if p != p.Masked() {
		return p, fmt.Errorf("has host bits set; write %s", p.Masked())
	}
	addr := p.Addr().Unmap()
	minBits := 8
	if addr.Is6() {
		minBits = 32
	}
	if p.Bits() < minBits {
		return p, fmt.Errorf("is broader than a /%d; name the range the database is in", minBits)
	}
	for _, forbidden := range neverReachable {
		if p.Overlaps(forbidden) {
			return p, fmt.Errorf("overlaps %s, which an environment may never reach", forbidden)
		}
	}
	return p, nil
}

// neverReachable are ranges no rule can open: loopback and link-local (the metadata endpoint).
var neverReachable = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fe80::/10"),
}

// commonClusterRanges are the ranges clusters commonly take their pod, Service and node
// addresses from: flannel's and kind's pods (10.244/16), kubeadm's and kind's Services
// (10.96/12), k3s's pods and Services (10.42/16, 10.43/16), Calico's default pool
// (192.168/16), Docker's bridge (172.17/16) and the shared range several clouds use for pods
// (100.64/10).
var commonClusterRanges = []netip.Prefix{
	netip.MustParsePrefix("10.244.0.0/16"),
	netip.MustParsePrefix("10.96.0.0/12"),
	netip.MustParsePrefix("10.42.0.0/16"),
	netip.MustParsePrefix("10.43.0.0/16"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("172.17.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"),
}

// clusterRangeOverlap returns the common cluster range p overlaps, if any.
func clusterRangeOverlap(p netip.Prefix) (netip.Prefix, bool) {
	for _, c := range commonClusterRanges {
		if p.Overlaps(c) {
			return c, true
		}
	}
	return netip.Prefix{}, false
}
