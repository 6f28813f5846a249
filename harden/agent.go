package harden

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Rule states in a report.
const (
	StateApplied   = "applied"   // put in place by this agent's first pass
	StateInPlace   = "in place"  // found as af puts it
	StateReapplied = "reapplied" // found changed or gone, and put back
	StateFailed    = "failed"    // could not be put in place (Error says why)
)

// RuleState is one rule in a report.
type RuleState struct {
	Chain  string   `json:"chain"`
	Tool   string   `json:"tool"`
	Closes []string `json:"closes"`
	Why    string   `json:"why"`
	State  string   `json:"state"`
	// Changed says what was found when it was put back; Error why it could not be.
	Changed string `json:"changed,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Report is what the agent did on one node in one pass, and since it started.
type Report struct {
	Node     string      `json:"node"`
	Found    Found       `json:"found"`
	PodCIDRs []string    `json:"pod_cidrs"`
	Bridges  []string    `json:"bridges"`
	Rules    []RuleState `json:"rules"`
	Notes    []string    `json:"notes,omitempty"`
	// Reapplied counts the rules put back since the agent started.
	Reapplied int `json:"reapplied"`
	// Uninstalled is true for the uninstall's report: every chain af adds removed.
	Uninstalled bool      `json:"uninstalled,omitempty"`
	Period      string    `json:"period,omitempty"`
	At          time.Time `json:"at"`
}

// Hardened is true when every rule the report's plan holds is in place and none failed.
func (r Report) Hardened() bool {
	if r.Uninstalled {
		return false
	}
	for _, s := range r.Rules {
		if s.State == StateFailed {
			return false
		}
	}
	return true
}

// Closes lists the routes the report's rules in place close.
func (r Report) Closes() []string {
	var out []string
	for _, s := range r.Rules {
		if s.State != StateFailed {
			for _, c := range s.Closes {
				if !slices.Contains(out, c) {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// Agent keeps af's rules on one node: each pass reads the node's packet filter, plans the
// rules its enforcer needs, and puts back any that is not in place. It never removes a rule
// when it stops (a node without them would leak): only Uninstall does.
type Agent struct {
	Run Runner
	// Node names the node; PodCIDRs reads its pod ranges (called each pass: a node's ranges
	// are set once, but the first read may come before they are).
	Node     string
	PodCIDRs func(ctx context.Context) ([]string, error)
	// Bridges, when set, names the pods' bridges; otherwise the bridges holding an address in
	// the pod ranges are found (FindBridges).
	Bridges []string
	// Sysctl writes a value under /proc/sys of the node's network namespace (path relative to
	// it, e.g. net/bridge/bridge-nf-call-ip6tables).
	Sysctl func(path, value string) error
	// Queues is the node's /proc/net/netfilter/nfnetlink_queue; Report publishes each pass's
	// report (nil: none); Logf says what it does.
	Queues string
	Report func(ctx context.Context, r Report) error
	Logf   func(format string, args ...any)
	Period time.Duration
	// Metrics, when set, records each pass of Keep.
	Metrics *Metrics

	reapplied int
	seen      map[string]bool // rules put in place by this agent
}

// Tables reads the node's packet filter through run.
func ReadTables(ctx context.Context, run Runner, queues string) Tables {
	var t Tables
	t.IPv4, _ = run.Run(ctx, "iptables-save", "-t", "filter")
	t.IPv6, _ = run.Run(ctx, "ip6tables-save", "-t", "filter")
	t.NFT, _ = run.Run(ctx, "nft", "list", "tables")
	if b, err := os.ReadFile(queues); err == nil {
		t.Queues = string(b)
	}
	return t
}

// Once is one pass: the rules the node's enforcer needs, each put in place unless it is.
func (a *Agent) Once(ctx context.Context) (Report, error) {
	if a.seen == nil {
		a.seen = map[string]bool{}
	}
	rep := Report{Node: a.Node, At: time.Now().UTC(), Period: a.Period.String()}
	if a.PodCIDRs != nil {
		cidrs, err := a.PodCIDRs(ctx)
		if err != nil {
			return rep, fmt.Errorf("the node's pod ranges: %w", err)
		}
		rep.PodCIDRs = cidrs
	}
	rep.Bridges = a.Bridges
	if len(rep.Bridges) == 0 {
		rep.Bridges = FindBridges(rep.PodCIDRs)
	}
	rep.Found = Detect(ReadTables(ctx, a.Run, a.queues()))
	rules, notes := Plan(Node{Found: rep.Found, PodCIDRs: rep.PodCIDRs, Bridges: rep.Bridges})
	rep.Notes = notes
	for _, r := range rules {
		st := RuleState{Chain: r.Chain, Tool: r.Tool, Closes: r.Closes, Why: r.Why}
		key := r.Tool + " " + r.Chain
		ok, differs, err := Present(ctx, a.Run, r)
		switch {
		case err != nil:
			st.State, st.Error = StateFailed, err.Error()
		case ok:
			st.State = StateInPlace
		default:
			err := a.apply(ctx, r)
			switch {
			case err != nil:
				st.State, st.Error = StateFailed, err.Error()
			case a.seen[key]:
				st.State, st.Changed = StateReapplied, differs
				a.reapplied++
				a.logf("%s (%s) put back: %s", r.Chain, r.Tool, differs)
			default:
				st.State = StateApplied
				a.logf("%s (%s) put in place: %s", r.Chain, r.Tool, r.Why)
			}
		}
		if st.State != StateFailed {
			a.seen[key] = true
		} else {
			a.logf("%s (%s) could not be put in place: %s", r.Chain, r.Tool, st.Error)
		}
		rep.Rules = append(rep.Rules, st)
	}
	rep.Reapplied = a.reapplied
	return rep, nil
}

func (a *Agent) apply(ctx context.Context, r Rule) error {
	for path, v := range r.Sysctls {
		if a.Sysctl == nil {
			continue
		}
		if err := a.Sysctl(path, v); err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", strings.ReplaceAll(path, "/", "."), v, err)
		}
	}
	return Apply(ctx, a.Run, r)
}

func (a *Agent) queues() string {
	if a.Queues != "" {
		return a.Queues
	}
	return "/proc/net/netfilter/nfnetlink_queue"
}

func (a *Agent) logf(format string, args ...any) {
	if a.Logf != nil {
		a.Logf(format, args...)
	}
}

// Keep makes a pass every Period until ctx ends, publishing each report, and leaves the rules
// in place when it ends. A pass that fails is said and tried again at the next period.
func (a *Agent) Keep(ctx context.Context) error {
	period := a.Period
	if period <= 0 {
		period = 10 * time.Second
	}
	var last string
	for {
		rep, err := a.Once(ctx)
		if err != nil {
			a.logf("pass failed (tried again in %s): %v", period, err)
			if a.Metrics != nil {
				a.Metrics.PassFailed()
			}
		} else {
			if a.Metrics != nil {
				a.Metrics.Observe(rep)
			}
			a.publish(ctx, rep)
			if s := summary(rep); s != last {
				a.logf("%s", s)
				last = s
			}
		}
		select {
		case <-ctx.Done():
			a.logf("stopping: the rules stay in place (an explicit uninstall removes them)")
			return nil
		case <-time.After(period):
		}
	}
}

func (a *Agent) publish(ctx context.Context, rep Report) {
	if a.Report == nil {
		return
	}
	if err := a.Report(ctx, rep); err != nil && ctx.Err() == nil {
		a.logf("could not publish the report: %v", err)
	}
}

// Uninstall removes every chain af adds, in both families, and publishes that.
func (a *Agent) Uninstall(ctx context.Context) (Report, error) {
	if err := RemoveAll(ctx, a.Run); err != nil {
		return Report{}, err
	}
	rep := Report{Node: a.Node, Uninstalled: true, At: time.Now().UTC(), Found: Detect(ReadTables(ctx, a.Run, a.queues()))}
	rep.Notes = []string{"every chain af harden adds (" + strings.Join(Chains, ", ") + ") removed from iptables and ip6tables"}
	a.logf("%s", rep.Notes[0])
	a.publish(ctx, rep)
	return rep, nil
}

// summary is one line for the log: the enforcer and each rule's state.
func summary(rep Report) string {
	var parts []string
	for _, r := range rep.Rules {
		parts = append(parts, fmt.Sprintf("%s/%s %s", r.Tool, r.Chain, r.State))
	}
	if len(parts) == 0 {
		parts = append(parts, "no rule")
	}
	enf := string(rep.Found.Enforcer)
	if enf == "" {
		enf = "no enforcer af knows"
	}
	s := fmt.Sprintf("node %s, %s: %s", rep.Node, enf, strings.Join(parts, ", "))
	for _, n := range rep.Notes {
		s += "; " + n
	}
	return s
}

// FindBridges returns the node's bridges that hold an address in one of podCIDRs: a bridge
// CNI's segment (cni0 under flannel and k3s).
func FindBridges(podCIDRs []string) []string {
	var prefixes []netip.Prefix
	for _, c := range podCIDRs {
		if p, err := netip.ParsePrefix(strings.TrimSpace(c)); err == nil {
			prefixes = append(prefixes, p.Masked())
		}
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var out []string
	for _, ifc := range ifs {
		if _, err := os.Stat(filepath.Join("/sys/class/net", ifc.Name, "bridge")); err != nil {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			ip = ip.Unmap()
			if slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(ip) }) {
				out = append(out, ifc.Name)
				break
			}
		}
	}
	return out
}
