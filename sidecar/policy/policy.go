// Package policy decides what an environment's outbound connection may do: allow, block or
// capture, by the manifest's egress rules.
//
// Precedence, for a host name: an exact host beats any wildcard; then the pattern with more
// literal labels; then a rule that names ports beats one that does not; among equals, the rule
// listed first. For an address (a client that connects to an IP literal): the cidr rule with
// the longest prefix, then one naming ports, then the first listed. A connection no rule
// matches gets the default.
package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/antifailure/af/manifest"
)

// Modes.
const (
	Allow   = "allow"
	Block   = "block"
	Capture = "capture"
)

// Decision is what the policy says of one destination.
type Decision struct {
	// Mode is allow, block or capture.
	Mode string
	// Rule names the rule that decided ("egress.rules[2]: *.stripe.com"), or "egress.default".
	Rule string
	// Reason says why, in words.
	Reason string
}

// Allowed reports whether the connection may go out.
func (d Decision) Allowed() bool { return d.Mode == Allow }

type hostRule struct {
	index   int
	pattern manifest.HostPattern
	ports   []int
	mode    string
	// rule and shown are the decision's Rule and the pattern as a reason names it, made once:
	// every request is decided, and formatting them each time was most of a decision's cost.
	rule, shown string
}

type rangeRule struct {
	index       int
	prefix      netip.Prefix
	ports       []int
	mode        string
	rule, shown string
}

// Policy is a compiled set of egress rules.
type Policy struct {
	def    string
	hosts  []hostRule
	ranges []rangeRule
}

// New compiles the manifest's egress section. It refuses what the manifest validation refuses.
func New(e manifest.Egress) (*Policy, error) {
	p := &Policy{def: e.Default}
	if p.def == "" {
		p.def = Block
	}
	if p.def != Allow && p.def != Block && p.def != Capture {
		return nil, fmt.Errorf("egress.default: %q is not allow, block or capture", e.Default)
	}
	for i, r := range e.Rules {
		mode := r.Mode
		if mode == "" {
			mode = Allow
		}
		if mode != Allow && mode != Block && mode != Capture {
			return nil, fmt.Errorf("egress.rules[%d].mode: %q is not allow, block or capture", i, r.Mode)
		}
		for _, port := range r.Ports {
			if port < 1 || port > 65535 {
				return nil, fmt.Errorf("egress.rules[%d].ports: %d is not a port", i, port)
			}
		}
		switch {
		case r.Host != "" && r.CIDR == "":
			hp, err := manifest.ParseHostPattern(r.Host)
			if err != nil {
				return nil, fmt.Errorf("egress.rules[%d].host: %q %w", i, r.Host, err)
			}
			p.hosts = append(p.hosts, hostRule{index: i, pattern: hp, ports: r.Ports, mode: mode, rule: fmt.Sprintf("egress.rules[%d]: %s", i, hp), shown: fmt.Sprint(hp)})
		case r.CIDR != "" && r.Host == "":
			pr, err := manifest.ParseRange(r.CIDR)
			if err != nil {
				return nil, fmt.Errorf("egress.rules[%d].cidr: %q %w", i, r.CIDR, err)
			}
			p.ranges = append(p.ranges, rangeRule{index: i, prefix: pr, ports: r.Ports, mode: mode, rule: fmt.Sprintf("egress.rules[%d]: %s", i, pr), shown: pr.String()})
		default:
			return nil, fmt.Errorf("egress.rules[%d]: a rule names exactly one of host and cidr", i)
		}
	}
	return p, nil
}

// Default returns the default mode.
func (p *Policy) Default() string { return p.def }

// Decide returns the decision for a connection to host:port. host may be a name or an IP
// literal; an IP literal is decided by the cidr rules only.
func (p *Policy) Decide(host string, port int) Decision {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if addr, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return p.DecideAddr(addr, port)
	}
	var best *hostRule
	for i := range p.hosts {
		r := &p.hosts[i]
		if !r.pattern.Match(h) || !portMatch(r.ports, port) {
			continue
		}
		if best == nil || hostMoreSpecific(r, best) {
			best = r
		}
	}
	if best == nil {
		return Decision{Mode: p.def, Rule: "egress.default", Reason: fmt.Sprintf("no rule matches %s:%d", h, port)}
	}
	return Decision{Mode: best.mode, Rule: best.rule, Reason: h + " matches " + best.shown}
}

// DecideAddr returns the decision for a connection to an address.
func (p *Policy) DecideAddr(addr netip.Addr, port int) Decision {
	addr = addr.Unmap()
	var best *rangeRule
	for i := range p.ranges {
		r := &p.ranges[i]
		if !r.prefix.Contains(addr) || !portMatch(r.ports, port) {
			continue
		}
		if best == nil || r.prefix.Bits() > best.prefix.Bits() || r.prefix.Bits() == best.prefix.Bits() && len(r.ports) > 0 && len(best.ports) == 0 {
			best = r
		}
	}
	if best == nil {
		return Decision{Mode: p.def, Rule: "egress.default", Reason: fmt.Sprintf("no rule matches %s port %d", addr, port)}
	}
	return Decision{Mode: best.mode, Rule: best.rule, Reason: addr.String() + " is in " + best.shown}
}

// AllowedRanges returns the ranges of cidr rules with mode allow: the only private addresses
// the sidecar may connect to.
func (p *Policy) AllowedRanges() []netip.Prefix {
	var out []netip.Prefix
	for _, r := range p.ranges {
		if r.mode == Allow {
			out = append(out, r.prefix)
		}
	}
	return out
}

func hostMoreSpecific(a, b *hostRule) bool {
	if a.pattern.Exact() != b.pattern.Exact() {
		return a.pattern.Exact()
	}
	if a.pattern.Literals() != b.pattern.Literals() {
		return a.pattern.Literals() > b.pattern.Literals()
	}
	if (len(a.ports) > 0) != (len(b.ports) > 0) {
		return len(a.ports) > 0
	}
	return false // equal: the earlier rule (b) stays
}

func portMatch(ports []int, port int) bool {
	return len(ports) == 0 || slices.Contains(ports, port)
}
