package fakenet

import (
	"context"
	"fmt"
	"log"
	"net"
	"strings"
)

// InternetPlan is what the fake internet serves.
type InternetPlan struct {
	PublicIP   string            // TCP echo on :80, UDP echo on :7
	ResolverIP string            // DNS on :53
	Hosts      map[string]string // names the resolver answers
	HTTPHosts  map[string]string // name -> address served over HTTP :80 and HTTPS :443
	MetadataIP string            // fake metadata HTTP on :80 (served by ServeMetadata)
	// PublicIP6 and ResolverIP6, when set, serve what PublicIP and ResolverIP do over IPv6.
	PublicIP6, ResolverIP6 string
	MetadataText           string
}

// ServeInternet runs every fake-internet server of plan until ctx ends or one fails.
func ServeInternet(ctx context.Context, plan InternetPlan, logger *log.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 16)
	run := func(f func() error) { go func() { errs <- f() }() }
	n := 0
	start := func(f func() error) { n++; run(f) }
	start(func() error { return ServeTCPEcho(ctx, net.JoinHostPort(plan.PublicIP, "80"), logger) })
	start(func() error { return ServeUDPEcho(ctx, net.JoinHostPort(plan.PublicIP, "7"), logger) })
	start(func() error { return ServeDNS(ctx, net.JoinHostPort(plan.ResolverIP, "53"), plan.Hosts, logger) })
	if plan.PublicIP6 != "" {
		start(func() error { return ServeTCPEcho(ctx, net.JoinHostPort(plan.PublicIP6, "80"), logger) })
		start(func() error { return ServeUDPEcho(ctx, net.JoinHostPort(plan.PublicIP6, "7"), logger) })
	}
	if plan.ResolverIP6 != "" {
		start(func() error { return ServeDNS(ctx, net.JoinHostPort(plan.ResolverIP6, "53"), plan.Hosts, logger) })
	}
	for name, ip := range plan.HTTPHosts {
		banner := "af-fake-internet " + strings.SplitN(name, ".", 2)[0]
		start(func() error { return ServeHTTP(ctx, net.JoinHostPort(ip, "80"), banner, nil, logger) })
		start(func() error { return ServeHTTP(ctx, net.JoinHostPort(ip, "443"), banner, []string{name}, logger) })
	}
	for range n {
		if err := <-errs; err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	return nil
}

// MetadataBanner is the first word of every fake metadata answer.
const MetadataBanner = "af-fake-metadata"

// ServeMetadata runs the fake metadata server on ip:80 until ctx ends.
func ServeMetadata(ctx context.Context, ip string, logger *log.Logger) error {
	if ip == "169.254.169.254" {
		return fmt.Errorf("refusing to serve metadata on the real metadata address %s", ip)
	}
	return ServeHTTP(ctx, net.JoinHostPort(ip, "80"), MetadataBanner, nil, logger)
}
