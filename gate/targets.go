package gate

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Production targets. Tests never use these: they point every route at test hosts.
const (
	DefaultPublicTCP   = "1.1.1.1:443"
	DefaultPublicDNS   = "8.8.8.8:53"
	DefaultMetadata    = "169.254.169.254:80"
	DefaultPublicTCP6  = "[2606:4700:4700::1111]:443"
	DefaultPublicDNS6  = "[2001:4860:4860::8888]:53"
	DefaultMetadata6   = "[fd00:ec2::254]:80"
	defaultSidecarPort = "3128"
	// DefaultNodePorts is what the node route tries when no ports are named: the kubelet.
	DefaultNodePorts = "10250/tcp"
)

// Addresses are the targets as configured (flags or environment); empty means the default.
type Addresses struct {
	PublicTCP, PublicDNS, Metadata, APIServer string
	PublicTCP6, PublicDNS6, Metadata6         string
	// IPv6 is auto, on or off, and governs only the public IPv6 routes (the -v6 ones). The
	// link-local route cannot be turned off: it looks whenever the pod has IPv6 at all.
	IPv6 string
	// LinkLocalPorts are the TCP ports tried on every IPv6 neighbour (DefaultLinkLocalPorts).
	LinkLocalPorts string
	// Node is the address of the node the pod runs on, or its addresses separated by commas
	// (the downward API's status.hostIPs: one per family on a dual-stack node); empty leaves
	// the node routes out. The routes at an IPv6 address are named with -v6. NodePorts are the ports it serves that the route tries
	// ("10250/tcp,30999/udp"; DefaultNodePorts): name one in the NodePort range that a
	// host-network listener answers, as the enforcer may exempt that range.
	Node, NodePorts string
	// NodeSamplePorts and NodeControlPort are the node-unannounced route's ports, inside the
	// NodePort range and outside it (DefaultNodeSamplePorts, DefaultNodeControlPort).
	NodeSamplePorts, NodeControlPort string
	Getenv                           func(string) string
	InterfaceAddrs                   func() ([]net.Addr, error)
}

// Targets resolves the configured addresses into the routes to try.
func (a Addresses) Targets() ([]Target, error) {
	or := func(v, def string) string {
		if v != "" {
			return v
		}
		return def
	}
	api := a.APIServer
	if api == "" && a.Getenv != nil {
		if h, p := a.Getenv("KUBERNETES_SERVICE_HOST"), a.Getenv("KUBERNETES_SERVICE_PORT"); h != "" && p != "" {
			api = net.JoinHostPort(h, p)
		}
	}
	if api == "" {
		return nil, fmt.Errorf("no API server address: set --apiserver, or run in a pod (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT)")
	}
	ts := []Target{
		{Route: RouteTCP, Addr: or(a.PublicTCP, DefaultPublicTCP)},
		{Route: RouteDNS, Addr: or(a.PublicDNS, DefaultPublicDNS)},
		{Route: RouteMetadata, Addr: or(a.Metadata, DefaultMetadata)},
		{Route: RouteAPIServer, Addr: api},
	}
	v6 := false
	switch strings.ToLower(or(a.IPv6, "auto")) {
	case "on", "true":
		v6 = true
	case "off", "false":
	case "auto":
		v6 = hasGlobalIPv6(a.InterfaceAddrs)
	default:
		return nil, fmt.Errorf("--ipv6 %q: auto, on or off", a.IPv6)
	}
	if v6 {
		ts = append(ts,
			Target{Route: RouteTCP + "-v6", Addr: or(a.PublicTCP6, DefaultPublicTCP6)},
			Target{Route: RouteDNS + "-v6", Addr: or(a.PublicDNS6, DefaultPublicDNS6)},
			Target{Route: RouteMetadata + "-v6", Addr: or(a.Metadata6, DefaultMetadata6)},
		)
	}
	llPorts, err := parsePorts(or(a.LinkLocalPorts, DefaultLinkLocalPorts))
	if err != nil {
		return nil, fmt.Errorf("link-local ports: %w", err)
	}
	ts = append(ts, Target{Route: RouteLinkLocal, Addr: "ff02::1+neighbours", ports: llPorts})
	if a.Node != "" {
		nodePorts, err := parsePorts(or(a.NodePorts, DefaultNodePorts))
		if err != nil {
			return nil, fmt.Errorf("node ports: %w", err)
		}
		if len(nodePorts) == 0 {
			return nil, fmt.Errorf("node ports: none named")
		}
		// Every address of the node (status.hostIPs: one per family on a dual-stack node); the
		// routes at its IPv6 address are named with -v6.
		for _, node := range strings.Split(a.Node, ",") {
			node = strings.TrimSpace(node)
			ip := net.ParseIP(node)
			if ip == nil {
				return nil, fmt.Errorf("node %q is not an IP address", node)
			}
			suffix := ""
			if ip.To4() == nil {
				suffix = "-v6"
			}
			for _, p := range nodePorts {
				t := Target{Route: RouteNode + suffix, Addr: net.JoinHostPort(node, strconv.Itoa(p.port))}
				if p.proto == "udp" {
					t.Network = "udp"
				}
				ts = append(ts, t)
			}
			u, err := unannouncedTarget(node, or(a.NodeSamplePorts, DefaultNodeSamplePorts), or(a.NodeControlPort, DefaultNodeControlPort))
			if err != nil {
				return nil, err
			}
			u.Route += suffix
			ts = append(ts, u)
		}
	}
	for _, t := range ts {
		if t.Route == RouteLinkLocal || t.unannounced != nil {
			continue
		}
		if _, _, err := net.SplitHostPort(t.Addr); err != nil {
			return nil, fmt.Errorf("%s target %q is not host:port", t.Route, t.Addr)
		}
	}
	return ts, nil
}

// hasGlobalIPv6 reports whether the pod has a global unicast IPv6 address.
func hasGlobalIPv6(addrs func() ([]net.Addr, error)) bool {
	if addrs == nil {
		addrs = net.InterfaceAddrs
	}
	as, err := addrs()
	if err != nil {
		return false
	}
	for _, a := range as {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() == nil && ipn.IP.IsGlobalUnicast() {
			return true
		}
	}
	return false
}

// SidecarAddr returns the sidecar's proxy address: the flag, else AF_SIDECAR, else the
// host of HTTP_PROXY with port 3128.
func SidecarAddr(flag string, getenv func(string) string) string {
	if flag != "" {
		return flag
	}
	if getenv == nil {
		return ""
	}
	if v := getenv("AF_SIDECAR"); v != "" {
		return v
	}
	for _, k := range []string{"HTTP_PROXY", "http_proxy"} {
		if v := getenv(k); v != "" {
			v = strings.TrimPrefix(strings.TrimPrefix(v, "http://"), "https://")
			v = strings.TrimSuffix(v, "/")
			if _, _, err := net.SplitHostPort(v); err == nil {
				return v
			}
			return net.JoinHostPort(v, defaultSidecarPort)
		}
	}
	return ""
}
