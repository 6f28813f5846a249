package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/antifailure/af/gate"
	"github.com/antifailure/af/testcluster/fakenet"
)

func echo(ctx context.Context, proto string, args []string) error {
	fs := flag.NewFlagSet(proto, flag.ContinueOnError)
	timeout := fs.Duration("timeout", 2*time.Second, "give up after")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: aftool %s [-timeout D] HOST:PORT", proto)
	}
	f := fakenet.TCPEcho
	if proto == "udp" {
		f = fakenet.UDPEcho
	}
	if err := f(ctx, fs.Arg(0), *timeout); err != nil {
		return err
	}
	fmt.Printf("%s %s ok\n", proto, fs.Arg(0))
	return nil
}

// connect reports whether a TCP connection to the address is accepted, whatever the server
// then says: for servers that do not echo (an API server).
func connect(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("connect", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 2*time.Second, "give up after")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: aftool connect [-timeout D] HOST:PORT")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", fs.Arg(0))
	if err != nil {
		return err
	}
	fmt.Printf("connect %s ok (%s)\n", fs.Arg(0), c.RemoteAddr())
	return c.Close()
}

func dns(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dns", flag.ContinueOnError)
	server := fs.String("server", "", "DNS server HOST:PORT (default: first nameserver in /etc/resolv.conf)")
	timeout := fs.Duration("timeout", 2*time.Second, "give up after")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: aftool dns [-server HOST:PORT] NAME")
	}
	names := []string{fs.Arg(0)}
	if *server == "" {
		conf, err := readResolvConf()
		if err != nil {
			return err
		}
		*server = conf.server
		names = conf.candidates(fs.Arg(0))
	}
	var lastErr error
	for _, name := range names {
		addrs, err := fakenet.Resolve(ctx, *server, name, *timeout)
		if err != nil {
			lastErr = err
			continue
		}
		for _, a := range addrs {
			fmt.Println(a)
		}
		return nil
	}
	return lastErr
}

// resolvConf is what aftool uses of /etc/resolv.conf.
type resolvConf struct {
	server string
	search []string
	ndots  int
}

// candidates lists the names to try for name, search domains first when name
// has fewer dots than ndots (as the C library resolver does).
func (c resolvConf) candidates(name string) []string {
	if strings.HasSuffix(name, ".") || strings.Count(name, ".") >= c.ndots {
		return append([]string{name}, c.expand(name)...)
	}
	return append(c.expand(name), name)
}

func (c resolvConf) expand(name string) []string {
	if strings.HasSuffix(name, ".") {
		return nil
	}
	var out []string
	for _, d := range c.search {
		out = append(out, name+"."+d)
	}
	return out
}

func readResolvConf() (resolvConf, error) {
	conf := resolvConf{ndots: 1}
	f, err := os.Open("/etc/resolv.conf")
	if err != nil {
		return conf, fmt.Errorf("find a nameserver: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 2 && fields[0] == "nameserver" && conf.server == "":
			conf.server = net.JoinHostPort(fields[1], "53")
		case len(fields) >= 2 && fields[0] == "search":
			conf.search = fields[1:]
		case len(fields) >= 2 && fields[0] == "options":
			for _, o := range fields[1:] {
				if n, ok := strings.CutPrefix(o, "ndots:"); ok {
					if v, err := strconv.Atoi(n); err == nil {
						conf.ndots = v
					}
				}
			}
		}
	}
	if conf.server == "" {
		return conf, fmt.Errorf("no nameserver in /etc/resolv.conf")
	}
	return conf, nil
}

func httpGet(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("http", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 3*time.Second, "give up after")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: aftool http URL")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fs.Arg(0), nil)
	if err != nil {
		return err
	}
	// The fake internet's certificates are self-signed; reaching the server is what is tested.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // #nosec G402
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	fmt.Printf("%d %s", resp.StatusCode, body)
	return nil
}

// linkLocal sweeps the IPv6 segment the way the gate's link-local route does (all-nodes
// echo and DNS, then TCP on every neighbour) and succeeds when anything answered. With no
// IPv6 on any interface but loopback it fails, saying so.
func linkLocal(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("linklocal", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 3*time.Second, "how long to listen for answers")
	ports := fs.String("ports", "", "TCP ports to try on every neighbour (default: the gate's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	outcome, detail, err := gate.LinkLocal(ctx, *ports)
	if err != nil {
		return err
	}
	if outcome != gate.Escaped {
		return fmt.Errorf("linklocal %s: %s", outcome, detail)
	}
	fmt.Printf("linklocal answered: %s\n", detail)
	return nil
}
