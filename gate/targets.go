package gate

import (
	"fmt"
	"net"
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
)

// Addresses are the targets as configured (flags or environment); empty means the default.
type Addresses struct {
	PublicTCP, PublicDNS, Metadata, APIServer string
	PublicTCP6, PublicDNS6, Metadata6         string
	IPv6                                      string // auto, on or off
	Getenv                                    func(string) string
	InterfaceAddrs                            func() ([]net.Addr, error)
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
		{RouteTCP, or(a.PublicTCP, DefaultPublicTCP)},
		{RouteDNS, or(a.PublicDNS, DefaultPublicDNS)},
		{RouteMetadata, or(a.Metadata, DefaultMetadata)},
		{RouteAPIServer, api},
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
			Target{RouteTCP + "-v6", or(a.PublicTCP6, DefaultPublicTCP6)},
			Target{RouteDNS + "-v6", or(a.PublicDNS6, DefaultPublicDNS6)},
			Target{RouteMetadata + "-v6", or(a.Metadata6, DefaultMetadata6)},
		)
	}
	for _, t := range ts {
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
