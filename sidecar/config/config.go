// Package config is the sidecar's configuration file: which environment it serves, where it
// listens, which names are the environment's own, whom it asks about names, and the egress
// rules. Load reads it strictly (unknown fields are errors) and checks it whole, reporting
// every problem, before the sidecar opens a single port.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/antifailure/af/manifest"
	"github.com/antifailure/af/sidecar/policy"
)

// Config is the sidecar's configuration.
type Config struct {
	// Environment is the environment id, recorded in every decision.
	Environment string `json:"environment"`
	// Namespace is the environment's namespace: names under <namespace>.svc.<cluster_domain>
	// are the environment's own.
	Namespace     string `json:"namespace"`
	ClusterDomain string `json:"cluster_domain,omitempty"`
	// Services are the environment's service names, resolved as short names too.
	Services []string `json:"services,omitempty"`
	// ClusterResolver (host:port) answers the environment's own names.
	ClusterResolver string `json:"cluster_resolver"`
	// UpstreamResolver (host:port) resolves external names for the sidecar's own connections;
	// empty uses the system resolver.
	UpstreamResolver string `json:"upstream_resolver,omitempty"`
	// AdvertiseIPv4 is the address every external name resolves to: the sidecar's own.
	AdvertiseIPv4 string `json:"advertise_ipv4"`
	// AdvertiseIPv6 is the same for AAAA queries; only read with ipv6.
	AdvertiseIPv6 string `json:"advertise_ipv6,omitempty"`
	IPv6          bool   `json:"ipv6,omitempty"`
	// ClusterCIDRs are the pod and service ranges, never reachable through the sidecar.
	ClusterCIDRs []string        `json:"cluster_cidrs,omitempty"`
	Egress       manifest.Egress `json:"egress"`
	Listen       Listen          `json:"listen"`
	Limits       Limits          `json:"limits"`
}

// Listen holds the listening addresses (host:port). An empty address turns a listener off,
// except the control endpoint, which is always on.
type Listen struct {
	Proxy   string   `json:"proxy,omitempty"`
	HTTP    string   `json:"http,omitempty"`
	HTTPS   string   `json:"https,omitempty"`
	DNS     string   `json:"dns,omitempty"`
	SMTP    []string `json:"smtp,omitempty"`
	Control string   `json:"control,omitempty"`
}

// Limits bound what one client can make the sidecar hold.
type Limits struct {
	MaxConns         int    `json:"max_conns,omitempty"`
	MaxHeaderBytes   int    `json:"max_header_bytes,omitempty"`
	IdleTimeout      string `json:"idle_timeout,omitempty"`
	HandshakeTimeout string `json:"handshake_timeout,omitempty"`
	LogEntries       int    `json:"log_entries,omitempty"`
	InboxMessages    int    `json:"inbox_messages,omitempty"`
	InboxBodyBytes   int    `json:"inbox_body_bytes,omitempty"`
}

// Defaults.
const (
	DefaultProxy   = ":3128"
	DefaultHTTP    = ":80"
	DefaultHTTPS   = ":443"
	DefaultDNS     = ":53"
	DefaultControl = ":9901"
)

// Resolved is a checked configuration with parsed values.
type Resolved struct {
	Config
	Policy           *policy.Policy
	AdvertiseV4      netip.Addr
	AdvertiseV6      netip.Addr
	ClusterPrefixes  []netip.Prefix
	IdleTimeout      time.Duration
	HandshakeTimeout time.Duration
}

// Load reads and checks the file at path.
func Load(path string) (*Resolved, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the sidecar configuration: %w", err)
	}
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c.Resolve()
}

// Resolve applies defaults and checks every field, reporting all problems at once.
func (c Config) Resolve() (*Resolved, error) {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if c.ClusterDomain == "" {
		c.ClusterDomain = "cluster.local"
	}
	l := &c.Listen
	if l.Proxy == "" && l.HTTP == "" && l.HTTPS == "" && l.DNS == "" && len(l.SMTP) == 0 {
		l.Proxy, l.HTTP, l.HTTPS, l.DNS, l.SMTP = DefaultProxy, DefaultHTTP, DefaultHTTPS, DefaultDNS, []string{":25", ":587"}
	}
	if l.Control == "" {
		l.Control = DefaultControl
	}
	lim := &c.Limits
	setDefault(&lim.MaxConns, 1024)
	setDefault(&lim.MaxHeaderBytes, 32<<10)
	setDefault(&lim.LogEntries, 10000)
	setDefault(&lim.InboxMessages, 1000)
	setDefault(&lim.InboxBodyBytes, 64<<10)
	if lim.IdleTimeout == "" {
		lim.IdleTimeout = "2m"
	}
	if lim.HandshakeTimeout == "" {
		lim.HandshakeTimeout = "10s"
	}

	r := &Resolved{Config: c}
	if c.Environment == "" {
		bad("environment: is required")
	}
	if c.Namespace == "" {
		bad("namespace: is required")
	}
	for i, s := range c.Services {
		if s == "" || strings.ContainsAny(s, ". ") {
			bad("services[%d]: %q is not a service name", i, s)
		}
	}
	if c.ClusterResolver == "" {
		bad("cluster_resolver: is required (host:port of the cluster's DNS service)")
	} else if _, err := hostPort(c.ClusterResolver); err != nil {
		bad("cluster_resolver: %v", err)
	}
	if c.UpstreamResolver != "" {
		if _, err := hostPort(c.UpstreamResolver); err != nil {
			bad("upstream_resolver: %v", err)
		}
	}
	if a, err := netip.ParseAddr(c.AdvertiseIPv4); err != nil || !a.Is4() {
		bad("advertise_ipv4: %q is not an IPv4 address (the sidecar's own address)", c.AdvertiseIPv4)
	} else {
		r.AdvertiseV4 = a
	}
	if c.IPv6 {
		if a, err := netip.ParseAddr(c.AdvertiseIPv6); err != nil || !a.Is6() {
			bad("advertise_ipv6: %q is not an IPv6 address; it is required with ipv6", c.AdvertiseIPv6)
		} else {
			r.AdvertiseV6 = a
		}
	}
	for i, s := range c.ClusterCIDRs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			bad("cluster_cidrs[%d]: %q is not a range", i, s)
			continue
		}
		r.ClusterPrefixes = append(r.ClusterPrefixes, p.Masked())
	}
	pol, err := policy.New(c.Egress)
	if err != nil {
		bad("%v", err)
	}
	r.Policy = pol

	ports := map[int]string{}
	check := func(name, addr string) {
		if addr == "" {
			return
		}
		port, err := hostPort(addr)
		if err != nil {
			bad("listen.%s: %v", name, err)
			return
		}
		if port == 0 {
			return // an ephemeral port (tests) clashes with nothing
		}
		if other, dup := ports[port]; dup && name != "control" {
			bad("listen.%s: port %d is also listen.%s", name, port, other)
		}
		if other, dup := ports[port]; dup && name == "control" {
			bad("listen.control: port %d is listen.%s, a port services may reach; the control endpoint must be on a port they cannot", port, other)
		}
		ports[port] = name
	}
	check("proxy", l.Proxy)
	check("http", l.HTTP)
	check("https", l.HTTPS)
	check("dns", l.DNS)
	for i, a := range l.SMTP {
		check(fmt.Sprintf("smtp[%d]", i), a)
	}
	check("control", l.Control)

	for name, n := range map[string]int{"max_conns": lim.MaxConns, "max_header_bytes": lim.MaxHeaderBytes, "log_entries": lim.LogEntries, "inbox_messages": lim.InboxMessages, "inbox_body_bytes": lim.InboxBodyBytes} {
		if n < 1 {
			bad("limits.%s: %d must be 1 or more", name, n)
		}
	}
	if r.IdleTimeout, err = positiveDuration(lim.IdleTimeout); err != nil {
		bad("limits.idle_timeout: %v", err)
	}
	if r.HandshakeTimeout, err = positiveDuration(lim.HandshakeTimeout); err != nil {
		bad("limits.handshake_timeout: %v", err)
	}
	if len(problems) > 0 {
		return nil, &Invalid{Problems: problems}
	}
	return r, nil
}

// Invalid lists every problem of a configuration.
type Invalid struct{ Problems []string }

func (e *Invalid) Error() string {
	return "the sidecar configuration is not valid:\n  " + strings.Join(e.Problems, "\n  ")
}

func setDefault(v *int, def int) {
	if *v == 0 {
		*v = def
	}
}

func hostPort(addr string) (int, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("%q is not host:port", addr)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return 0, fmt.Errorf("%q has no valid port", addr)
	}
	return n, nil
}

func positiveDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration like 30s", s)
	}
	if d <= 0 {
		return 0, errors.New("must be positive")
	}
	return d, nil
}
