package conformance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/antifailure/af/conformance/verdict"
)

// ---- attempts ----

func httpURL(host string) string { return "http://" + host + "/" }

// outside are the positive controls: each target answers where no containment applies.
func (s *suite) outside(t *testing.T) *tried {
	t.Helper()
	return s.outsideBatch()
}

// outsideBatch is outside for any goroutine.
func (s *suite) outsideBatch() *tried {
	tg := s.opts.Targets
	attempts := []Attempt{
		{Name: "public-tcp", Kind: TCP, Target: tg.PublicTCP},
		{Name: "udp", Kind: DNS, Target: tg.ResolverName, Server: tg.Resolver},
		{Name: "allowed-http", Kind: HTTP, Target: httpURL(tg.AllowedHost)},
		{Name: "allowed-by-ip", Kind: HTTP, Target: httpURL(tg.AllowedIP)},
		{Name: "unlisted-http", Kind: HTTP, Target: httpURL(tg.UnlistedHost)},
		{Name: "metadata", Kind: HTTP, Target: httpURL(tg.Metadata)},
	}
	for i, a := range tg.APIServer {
		attempts = append(attempts, Attempt{Name: fmt.Sprintf("api-%d", i), Kind: TCPConnect, Target: a})
	}
	for i, p := range tg.TokenPaths {
		attempts = append(attempts, Attempt{Name: fmt.Sprintf("token-%d", i), Kind: Read, Target: p})
	}
	attempts = append(attempts, insideCluster(tg)...)
	return s.try("outside", s.h.TryOutside, attempts)
}

// linkLocalPorts are the ports the link-local sweep tries on every neighbour: DNS (the cluster
// resolver), the suite's services' port, the sidecar's control port, the kubelet.
const linkLocalPorts = "53,8080,9901,10250"

// fromMain tries everything from a throwaway instance of main's api.
func (s *suite) fromMain(t *testing.T) *tried {
	t.Helper()
	return ran(t)(s.tryFromMain())
}

// ran returns a batch that could run, failing t with the reason one could not.
func ran(t *testing.T) func(*tried, error) *tried {
	return func(m *tried, err error) *tried {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
}

// tryFromMain is fromMain for any goroutine: what keeps the batch from running is an error.
func (s *suite) tryFromMain() (*tried, error) {
	if m := s.memoised("main"); m != nil {
		return m, nil
	}
	e := s.main()
	if err := e.notUp(); err != nil {
		return nil, err
	}
	o := s.other()
	if err := o.notUp(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.UpTimeout)
	defer cancel()
	cross, err := s.h.Addresses(ctx, o.ref, "lonely")
	if err != nil {
		return nil, fmt.Errorf("%s addresses of the other environment: %w", verdict.Broken, err)
	}
	if len(cross) == 0 {
		return nil, errors.New(verdict.Broken + " the harness lists no address of the other environment's service")
	}
	tg := s.opts.Targets
	_, port, _ := net.SplitHostPort(tg.PublicTCP)
	attempts := []Attempt{
		{Name: "own-name", Kind: DNS, Target: "store"},
		{Name: "own-service", Kind: TCP, Target: "store:8080"},
		{Name: "allowed-http", Kind: HTTP, Target: httpURL(tg.AllowedHost)},
		{Name: "allowed-proxy", Kind: HTTPProxy, Target: tg.AllowedHost},
		{Name: "unlisted-http", Kind: HTTP, Target: httpURL(tg.UnlistedHost)},
		{Name: "unlisted-proxy", Kind: HTTPProxy, Target: tg.UnlistedHost},
		{Name: "allowed-by-ip", Kind: HTTP, Target: httpURL(tg.AllowedIP)},
		{Name: "public-tcp", Kind: TCP, Target: tg.PublicTCP},
		{Name: "public-by-name", Kind: TCP, Target: net.JoinHostPort(tg.ResolverName, port)},
		{Name: "metadata", Kind: HTTP, Target: httpURL(tg.Metadata)},
		{Name: "metadata-proxy", Kind: HTTPProxy, Target: tg.Metadata},
		{Name: "udp", Kind: DNS, Target: tg.ResolverName, Server: tg.Resolver},
		{Name: "cross-name", Kind: DNS, Target: "lonely"},
		{Name: "memory-v2", Kind: Read, Target: "/sys/fs/cgroup/memory.max"},
		{Name: "memory-v1", Kind: Read, Target: "/sys/fs/cgroup/memory/memory.limit_in_bytes"},
	}
	for i, a := range tg.APIServer {
		attempts = append(attempts, Attempt{Name: fmt.Sprintf("api-%d", i), Kind: TCPConnect, Target: a})
	}
	for i, p := range tg.TokenPaths {
		attempts = append(attempts, Attempt{Name: fmt.Sprintf("token-%d", i), Kind: Read, Target: p})
	}
	for i, a := range cross {
		attempts = append(attempts, Attempt{Name: fmt.Sprintf("cross-%d", i), Kind: TCP, Target: a})
	}
	attempts = append(attempts, insideCluster(tg)...)
	return s.try("main", func(ctx context.Context, a []Attempt) ([]Outcome, error) {
		return s.h.Try(ctx, e.ref, "api", a)
	}, attempts), nil
}

// fromOther tries from the environment with no egress rules.
func (s *suite) fromOther(t *testing.T) *tried {
	t.Helper()
	return ran(t)(s.tryFromOther())
}

// tryFromOther is fromOther for any goroutine.
func (s *suite) tryFromOther() (*tried, error) {
	e := s.other()
	if err := e.notUp(); err != nil {
		return nil, err
	}
	tg := s.opts.Targets
	return s.try("other", func(ctx context.Context, a []Attempt) ([]Outcome, error) {
		return s.h.Try(ctx, e.ref, "lonely", a)
	}, []Attempt{
		{Name: "own-service", Kind: TCP, Target: "lonely:8080"},
		{Name: "allowed-http", Kind: HTTP, Target: httpURL(tg.AllowedHost)},
		{Name: "allowed-proxy", Kind: HTTPProxy, Target: tg.AllowedHost},
		{Name: "unlisted-http", Kind: HTTP, Target: httpURL(tg.UnlistedHost)},
		{Name: "public-tcp", Kind: TCP, Target: tg.PublicTCP},
		{Name: "udp", Kind: DNS, Target: tg.ResolverName, Server: tg.Resolver},
	}), nil
}

// control requires the named outside attempt to have reached its target (and, when banner
// is set, the answer to be the origin's), or nothing refused inside proves anything.
func (s *suite) control(t *testing.T, name, banner string) {
	t.Helper()
	m := s.outside(t)
	m.get(t, name)
	a, o := m.retried(name, answered(banner))
	if !answered(banner)(o) {
		t.Fatalf("%s control: %s did not answer from outside every environment (ok=%v %q), so its refusal inside would prove nothing", verdict.Broken, a, o.OK, o.Output)
	}
}

// works requires an attempt to succeed (with banner in the answer when set).
func works(t *testing.T, m *tried, name, banner string) {
	t.Helper()
	m.get(t, name)
	a, o := m.retried(name, answered(banner))
	if !answered(banner)(o) {
		t.Errorf("%s %s should work: ok=%v %q", verdict.Broken, a, o.OK, o.Output)
	}
}

// answered is what an attempt that must work must show: it succeeded and, when banner is set,
// the answer carries it.
func answered(banner string) func(Outcome) bool {
	return func(o Outcome) bool { return o.OK && (banner == "" || strings.Contains(o.Output, banner)) }
}

// fails requires an attempt to fail.
func fails(t *testing.T, m *tried, name string) {
	t.Helper()
	a, o := m.get(t, name)
	if o.OK {
		t.Errorf("%s %s got through: %q", verdict.Escape, a, o.Output)
	}
}

// notFromOrigin requires that whatever answered was not the origin (no banner).
func notFromOrigin(t *testing.T, m *tried, name, banner string) {
	t.Helper()
	a, o := m.get(t, name)
	if strings.Contains(o.Output, banner) {
		t.Errorf("%s %s was answered by the origin: %q", verdict.Escape, a, o.Output)
	}
}

func indexed(m *tried, prefix string) []string {
	var out []string
	for _, a := range m.attempts {
		if strings.HasPrefix(a.Name, prefix) {
			out = append(out, a.Name)
		}
	}
	return out
}

// insideCluster are the attempts every environment makes at the cluster's inside: its
// resolver for a name of the cluster, the pod's IPv6 segment, and the node's ports.
func insideCluster(tg Targets) []Attempt {
	out := []Attempt{
		{Name: "cluster-dns", Kind: DNS, Target: tg.ClusterName, Server: tg.ClusterResolver},
		{Name: "link-local", Kind: LinkLocal, Target: linkLocalPorts},
	}
	for i, a := range tg.Node {
		out = append(out, Attempt{Name: fmt.Sprintf("node-%d", i), Kind: TCPConnect, Target: a, Node: true})
	}
	return out
}
