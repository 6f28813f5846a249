package conformance

import (
	"context"
	"fmt"
	"testing"

	"github.com/antifailure/af/runtime"
)

// Harness is what the suite needs from a runtime's tests beside the runtime itself: a way to
// try connections from inside an environment exactly as one of its services would, from
// outside every environment (the positive controls), and to look at and remove instances.
// Each runtime's tests implement it for the place that runtime puts environments.
type Harness interface {
	// Try runs the attempts, in order, in a throwaway instance made exactly like the
	// service's instances (network identity and policy, resolver, proxy settings, gate,
	// credentials, size) and returns one outcome per attempt.
	Try(ctx context.Context, env runtime.Ref, service string, attempts []Attempt) ([]Outcome, error)
	// TryOutside runs the attempts where no environment's containment applies, on the same
	// platform: the control that shows each target answers at all.
	TryOutside(ctx context.Context, attempts []Attempt) ([]Outcome, error)
	// Addresses lists host:port addresses a service of env can be reached at from elsewhere
	// on the platform: its stable name in full, its stable address, each instance's address.
	Addresses(ctx context.Context, env runtime.Ref, service string) ([]string, error)
	// Instances lists every instance of env's services and migrations, as they are now.
	Instances(ctx context.Context, env runtime.Ref) ([]Instance, error)
	// Remove deletes one instance the way an eviction would; the runtime replaces it.
	Remove(ctx context.Context, env runtime.Ref, instance string) error
	// Unmanaged creates, where env would live, something the runtime did not make (on
	// Kubernetes: a namespace of that name with a ConfigMap in it).
	Unmanaged(ctx context.Context, env runtime.Ref) (Unmanaged, error)
	// Fetch GETs a preview URL the way its users would reach it.
	Fetch(ctx context.Context, url string) (status int, body string, err error)
}

// Unmanaged is something the suite made behind the runtime's back.
type Unmanaged interface {
	// Unchanged fails when it, or anything in it, was changed or removed.
	Unchanged(ctx context.Context) error
	// Remove deletes it and waits until it is gone.
	Remove(ctx context.Context) error
}

// Subject is a runtime under test with its harness.
type Subject struct {
	Runtime runtime.Runtime
	Harness Harness
}

// Factory makes the subject for one run of the suite; it registers its own cleanup on t.
type Factory func(t *testing.T) Subject

// Kind is the kind of an attempt.
type Kind string

// Attempt kinds.
const (
	// TCP connects to Target (host:port), sends a line and expects it echoed.
	TCP Kind = "tcp"
	// TCPConnect connects to Target (host:port); OK when the handshake completes, whatever
	// the server then says.
	TCPConnect Kind = "connect"
	// DNS resolves Target with the instance's resolver; with Server, asks Server over UDP.
	DNS Kind = "dns"
	// HTTP GETs Target (a URL) with a client that ignores the proxy variables.
	HTTP Kind = "http"
	// HTTPProxy GETs http://Target/ through the proxy the instance's HTTP_PROXY names.
	HTTPProxy Kind = "http-proxy"
	// Read reads the file Target.
	Read Kind = "read"
	// Mail sends one message over SMTP to Target (host:port) for To, as an application would;
	// OK when the server took it.
	Mail Kind = "mail"
	// LinkLocal sweeps the instance's IPv6 segment: an ICMPv6 echo and a DNS query to the
	// all-nodes group, then TCP to every neighbour on the ports Target lists ("53,8080"). OK
	// when anything answered; an instance with no IPv6 but loopback fails, saying so.
	LinkLocal Kind = "link-local"
)

// Attempt is one thing tried from an instance.
type Attempt struct {
	Name   string
	Kind   Kind
	Target string
	Server string // DNS only: ask this host:port over UDP instead of the instance's resolver
	// Header is one "Name: value" header an HTTPProxy attempt sends (a credential, to see it
	// redacted where it is kept).
	Header string
	// To is the recipient of a Mail attempt.
	To string
	// Node: the target is an address of the node the instance runs on. Where a pod outside
	// every environment is refused too (an operator's node firewall: deploy/harden's
	// AF-NODEPORT refuses every pod's new connections to the node's NodePort range), a
	// harness may make this attempt's control from the node's own network: the control then
	// shows that the target answers, and the attempt from inside must still fail.
	Node bool
}

func (a Attempt) String() string {
	s := fmt.Sprintf("%s %s", a.Kind, a.Target)
	if a.Server != "" {
		s += " via " + a.Server
	}
	return s
}

// Outcome is what an attempt got: OK when the client succeeded (for HTTP: any answer), and
// what it printed (for HTTP, the status and the start of the body).
type Outcome struct {
	OK     bool
	Output string
	// From is the address the attempt was made from: the throwaway instance's (Try).
	From string
}

// Instance is one running (or finished) instance of a service or migration.
type Instance struct {
	Name      string
	Service   string
	Migration bool
	// Gated: a trusted gate ran before the instance's own command.
	Gated bool
	// GateExitCode is the gate's exit code once it finished.
	GateExitCode *int
	// Started: the instance's own command has started (it may have ended since). A runtime
	// may create an instance before its turn and hold it behind its gate; it must not start it.
	Started bool
	// Ready: the instance is running and passes its readiness check.
	Ready bool
	// Log is the instance's own output (not the gate's).
	Log string
}
