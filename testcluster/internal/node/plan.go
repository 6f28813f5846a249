package node

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/antifailure/af/testcluster/internal/layout"
)

// ourPrefixes are the ranges the cluster routes to itself.
func ourPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{layout.PodCIDR, layout.ServiceCIDR, layout.FakeInternetCIDR, layout.InetHostIP + "/29", layout.MetadataIP + "/32",
		layout.ClusterRange6, layout.FakeInternetCIDR6} {
		out = append(out, netip.MustParsePrefix(s).Masked())
	}
	return out
}

// checkAddressPlan refuses to start when one of the cluster's ranges is
// already in use on this machine: a route other than the default one, an
// address of an interface, a nameserver, or the address the machine reaches
// its package registries at. Routing such a range into the cluster would cut
// the machine off (it happened: the registries answer at a TEST-NET-3 address).
func checkAddressPlan(ctx context.Context) error {
	var used []string
	note := func(what, addr string) {
		a, err := netip.ParseAddr(addr)
		if err != nil {
			return
		}
		for _, p := range ourPrefixes() {
			if p.Contains(a.Unmap()) {
				used = append(used, fmt.Sprintf("%s %s is in the cluster's range %s", what, addr, p))
			}
		}
	}
	if out, err := run(ctx, "ip", "-o", "addr", "show"); err == nil {
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			for i := 0; i+1 < len(f); i++ {
				if f[i] == "inet" || f[i] == "inet6" {
					note("interface address", strings.SplitN(f[i+1], "/", 2)[0])
				}
			}
		}
	}
	for _, fam := range []string{"-4", "-6"} {
		out, err := run(ctx, "ip", fam, "route", "show", "table", "main")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || f[0] == "default" {
				if len(f) > 2 && f[1] == "via" {
					note("default gateway", f[2])
				}
				continue
			}
			if p, err := netip.ParsePrefix(f[0]); err == nil {
				for _, q := range ourPrefixes() {
					if p.Overlaps(q) {
						used = append(used, fmt.Sprintf("route %q overlaps the cluster's range %s", line, q))
					}
				}
			}
		}
	}
	for _, ns := range nameservers() {
		note("nameserver", ns)
	}
	for _, host := range registryHosts(ctx) {
		addrs, _ := net.DefaultResolver.LookupHost(ctx, host)
		for _, a := range addrs {
			note("package registry "+host, a)
		}
	}
	if len(used) > 0 {
		return fmt.Errorf("the cluster's address plan collides with this machine's network:\n  %s", strings.Join(used, "\n  "))
	}
	return nil
}

func nameservers() []string {
	f, err := os.Open("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "nameserver" {
			out = append(out, fields[1])
		}
	}
	return out
}

// registryHosts are the hosts of the Go module proxy and of apt's sources.
func registryHosts(ctx context.Context) []string {
	var urls []string
	if out, err := exec.CommandContext(ctx, "go", "env", "GOPROXY").Output(); err == nil {
		urls = append(urls, strings.FieldsFunc(strings.TrimSpace(string(out)), func(r rune) bool { return r == ',' || r == '|' })...)
	}
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*")
	for _, f := range append(files, "/etc/apt/sources.list") {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, w := range strings.Fields(string(b)) {
			if strings.HasPrefix(w, "http://") || strings.HasPrefix(w, "https://") {
				urls = append(urls, w)
			}
		}
	}
	seen := map[string]bool{}
	var hosts []string
	for _, u := range urls {
		p, err := url.Parse(u)
		if err != nil || p.Hostname() == "" || seen[p.Hostname()] {
			continue
		}
		seen[p.Hostname()] = true
		hosts = append(hosts, p.Hostname())
	}
	return hosts
}
