package trust

import (
	"fmt"
	"slices"
	"strings"

	"github.com/antifailure/af/manifest"
)

// Widening lists what pr's egress lets an environment reach that base's does not: default
// allow where the base does not say it, an allow or capture rule for a host the base does not
// open on those ports, and any cidr rule the base does not have as it is. A pull request does
// not write its own egress policy: these apply only with a maintainer's approval
// (Sources.EgressApproved).
func Widening(base, pr manifest.Egress) []string {
	var out []string
	if pr.Default == "allow" && base.Default != "allow" {
		out = append(out, fmt.Sprintf("default: allow (the base branch says %s)", orBlock(base.Default)))
	}
	for _, r := range pr.Rules {
		mode := r.Mode
		if mode == "" {
			mode = "allow"
		}
		if mode == "block" {
			continue
		}
		if r.CIDR != "" {
			if !slices.ContainsFunc(base.Rules, func(b manifest.EgressRule) bool {
				return b.CIDR == r.CIDR && modeOf(b) == mode && slices.Equal(b.Ports, r.Ports)
			}) {
				out = append(out, describe(r, mode))
			}
			continue
		}
		if !slices.ContainsFunc(base.Rules, func(b manifest.EgressRule) bool {
			return strings.EqualFold(b.Host, r.Host) && modeOf(b) == mode && covers(b.Ports, r.Ports)
		}) {
			out = append(out, describe(r, mode))
		}
	}
	return out
}

func modeOf(r manifest.EgressRule) string {
	if r.Mode == "" {
		return "allow"
	}
	return r.Mode
}

func orBlock(s string) string {
	if s == "" {
		return "block"
	}
	return s
}

// covers says whether the base's ports hold all of the pull request's (no ports: every port).
func covers(base, pr []int) bool {
	if len(base) == 0 {
		return true
	}
	if len(pr) == 0 {
		return false
	}
	for _, p := range pr {
		if !slices.Contains(base, p) {
			return false
		}
	}
	return true
}

func describe(r manifest.EgressRule, mode string) string {
	what := "host " + r.Host
	if r.CIDR != "" {
		what = "cidr " + r.CIDR
	}
	ports := "every port"
	if len(r.Ports) > 0 {
		var ps []string
		for _, p := range r.Ports {
			ps = append(ps, fmt.Sprint(p))
		}
		ports = "ports " + strings.Join(ps, ",")
	}
	return fmt.Sprintf("%s, %s: %s", what, ports, mode)
}
