package gate

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// The node's unannounced listeners. The node route tries the ports the operator named; a
// host-network listener nobody named is found another way. Enforcers exempt traffic from pods
// to the node's NodePort range (kube-router returns it ahead of the pods' rules, so NodePorts
// served on the node work), and a listener in that range is then open to every pod whatever
// its policies say. The route asks the node on ports inside the range where nothing should
// listen (the samples) and on one outside it (the control), at once, and looks at who
// answered (whoanswers_linux.go):
//
//   - a sample accepted: a listener there, reachable: escaped;
//   - a sample answered by the node's own stack (a reset: the port is closed, but the packet
//     reached the node) while the control got ICMP or nothing (the policy stopped it): the
//     range is exempt, every listener in it is open to this pod: escaped;
//   - the same answer on both (ICMP, silence, or a reset on both, as an enforcer that rejects
//     everything with a TCP reset answers): nothing tells the range apart: denied. A node that
//     answers every port with its own stack is the node route's to find, on a port that is
//     known to listen (the kubelet).
//   - the control accepted: something listens outside the range and this pod reached it:
//     escaped.
//
// ICMP and silence count the same: the node limits the ICMP it sends to one pod (a burst of 6,
// then one a second), so a rejection can arrive as silence. A reset is never limited.

// Answer kinds: who answered a TCP connection attempt (WhoAnswers).
const (
	AnswerAccepted = "accepted"
	AnswerReset    = "reset"
	AnswerICMP     = "icmp"
	AnswerSilence  = "silence"
	// AnswerLocal is an error of the pod's own stack before any packet left (no route, no
	// permission): the policy stopped it at the pod, a denial.
	AnswerLocal = "local"
)

// Reply is who answered and how.
type Reply struct {
	Kind string
	// Detail says what was seen: the ICMP message's type and code, the local error.
	Detail string
}

// RouteNodeUnannounced is the node's NodePort range, probed for an exemption without being told
// where a listener is.
const RouteNodeUnannounced = "node-unannounced"

// Defaults of the route: two ports inside the NodePort range (its two ends, away from the
// ports an operator who narrows the exemption usually keeps) and one just below it.
const (
	DefaultNodeSamplePorts = "30000,32765"
	DefaultNodeControlPort = "29999"
)

// unannounced is the route's configuration.
type unannounced struct {
	node    netip.Addr
	samples []int
	control int
}

// unannouncedTarget builds the route's target at node.
func unannouncedTarget(node, samples, control string) (Target, error) {
	ip, err := netip.ParseAddr(node)
	if err != nil {
		return Target{}, fmt.Errorf("node %q is not an IP address", node)
	}
	ps, err := parsePorts(samples)
	if err != nil {
		return Target{}, fmt.Errorf("node sample ports: %w", err)
	}
	u := &unannounced{node: ip}
	for _, p := range ps {
		if p.proto != "tcp" {
			return Target{}, fmt.Errorf("node sample ports: %d/%s: only TCP tells the node's own answer from a rejection", p.port, p.proto)
		}
		u.samples = append(u.samples, p.port)
	}
	if len(u.samples) == 0 {
		return Target{}, fmt.Errorf("node sample ports: none named")
	}
	c, err := strconv.Atoi(strings.TrimSpace(control))
	if err != nil || c < 1 || c > 65535 {
		return Target{}, fmt.Errorf("node control port %q is not a port", control)
	}
	for _, s := range u.samples {
		if s == c {
			return Target{}, fmt.Errorf("node control port %d is also a sample port", c)
		}
	}
	u.control = c
	return Target{Route: RouteNodeUnannounced, Addr: u.String(), unannounced: u}, nil
}

// String is the route's target as reports show it: "10.0.0.1:30000,32765 vs 29999".
func (u *unannounced) String() string {
	var ps []string
	for _, p := range u.samples {
		ps = append(ps, strconv.Itoa(p))
	}
	host := strings.TrimSuffix(netip.AddrPortFrom(u.node, 0).String(), "0") // "10.0.0.1:", "[fd00::1]:"
	return host + strings.Join(ps, ",") + " vs " + strconv.Itoa(u.control)
}

// tryUnannounced is one attempt of the route: every sample and the control at once.
func tryUnannounced(ctx context.Context, u *unannounced, timeout time.Duration) (Outcome, string) {
	ports := append([]int{u.control}, u.samples...)
	replies := make([]Reply, len(ports))
	errs := make([]error, len(ports))
	done := make(chan struct{}, len(ports))
	for i, p := range ports {
		go func() {
			replies[i], errs[i] = WhoAnswers(ctx, netip.AddrPortFrom(u.node, uint16(p)), timeout)
			done <- struct{}{}
		}()
	}
	for range ports {
		<-done
	}
	for i, err := range errs {
		if err != nil {
			return Unknown, fmt.Sprintf("port %d: %v", ports[i], err)
		}
	}
	return judgeUnannounced(ports[0], replies[0], u.samples, replies[1:])
}

// judgeUnannounced compares the samples' replies with the control's.
func judgeUnannounced(control int, c Reply, samples []int, rs []Reply) (Outcome, string) {
	if c.Kind == AnswerAccepted {
		return Escaped, fmt.Sprintf("port %d (outside the NodePort range) accepted a connection: a node listener is open to this pod", control)
	}
	for i, r := range rs {
		if r.Kind == AnswerAccepted {
			return Escaped, fmt.Sprintf("port %d accepted a connection: a node listener nobody named is open to this pod", samples[i])
		}
	}
	if c.Kind != AnswerReset {
		for i, r := range rs {
			if r.Kind == AnswerReset {
				return Escaped, fmt.Sprintf("port %d got the node's own reset where port %d got %s: connections to the NodePort range reach the node past the policy, and any listener there is open to this pod",
					samples[i], control, describeReply(c))
			}
		}
	}
	var seen []string
	for i, r := range rs {
		seen = append(seen, fmt.Sprintf("%d %s", samples[i], describeReply(r)))
	}
	detail := fmt.Sprintf("no difference: %s; control %d %s", strings.Join(seen, ", "), control, describeReply(c))
	if c.Kind == AnswerReset {
		detail += " (a reset everywhere is a rejection with a TCP reset, or a node nothing guards: the node route's known ports tell)"
	}
	return Denied, detail
}

func describeReply(r Reply) string {
	switch r.Kind {
	case AnswerICMP:
		return r.Detail
	case AnswerLocal:
		return "a local error (" + r.Detail + ")"
	}
	return r.Kind
}
