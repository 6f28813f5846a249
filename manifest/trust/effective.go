package trust

import "github.com/antifailure/af/manifest"

// Sources are what the manifest of a run is made from. Nothing in them is changed.
type Sources struct {
	// Manifest is the af.yaml the run was given (a pull request's, or the workspace's).
	Manifest *manifest.Manifest
	// PullRequest says the run is a pull request's: its af.yaml is untrusted input, held to
	// Base. Otherwise (a dispatch naming an environment) Manifest is taken as it is.
	PullRequest bool
	// Base is the operator's af.yaml: the default branch's at its head; nil when it has none or
	// it could not be read (the defaults then rule).
	Base *manifest.Manifest
	// EgressApproved says a maintainer approved what the pull request's egress opens beyond the
	// base's (the approval label, or the approval of a fork's commit).
	EgressApproved bool
	// Registry, when set, is where the run publishes images: it replaces runtime.registry.
	Registry string
}

// Result is the manifest a run works under and what of its af.yaml was left out, and why.
type Result struct {
	Manifest *manifest.Manifest
	// Ignored are the base-only fields and the sizes beyond the base's limits (Apply).
	Ignored []Ignored
	// EgressWidened is what the pull request's egress opens beyond the base's (Widening),
	// approved or not.
	EgressWidened []string
	// EgressLeftOut is EgressWidened when it was not approved: the base's egress rules instead.
	EgressLeftOut []string
}

// Effective is the one making of a run's manifest: the pull request's af.yaml held to the
// operator's (Apply), its egress the base's unless the widening was approved, and the registry
// the run publishes to. It reads and writes nothing else.
func Effective(s Sources) Result {
	m := *s.Manifest
	var out Result
	if s.PullRequest {
		held, ignored := Apply(s.Base, s.Manifest)
		m, out.Ignored = *held, ignored
		base := manifest.Egress{}
		if s.Base != nil {
			base = s.Base.Egress
		}
		out.EgressWidened = Widening(base, m.Egress)
		if len(out.EgressWidened) > 0 && !s.EgressApproved {
			m.Egress, out.EgressLeftOut = base, out.EgressWidened
		}
	}
	if s.Registry != "" {
		m.Runtime.Registry = s.Registry
	}
	out.Manifest = &m
	return out
}
