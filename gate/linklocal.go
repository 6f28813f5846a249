package gate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
)

// The IPv6 link-local route. An enforcer that only programs IPv4 leaves every pod's fe80::
// address open to every other pod on the same bridge, to the node and to the cluster resolver:
// none of that is in a NetworkPolicy's ipsets. So wherever a pod has IPv6 at all, the gate
// looks at its segment the way an attacker would: an ICMPv6 echo and a DNS query to the
// all-nodes group (ff02::1), then a TCP connection to every neighbour it learnt of (from those
// answers and from the kernel's neighbour table) on the ports that matter. Any answer from any
// address that is not the pod's own is an escape. A pod whose interfaces have IPv6 disabled
// (or a kernel without IPv6) has no such route: that, read from /proc/sys, is the denial. An
// interface with IPv6 enabled but no address yet (the address is added a moment after the link
// comes up) is not a denial: the round is unknown, and the gate looks again.

// DefaultLinkLocalPorts are the TCP ports tried on every IPv6 neighbour: DNS (the cluster
// resolver), the sidecar's proxy and control ports, the kubelet, and the common service ports.
const DefaultLinkLocalPorts = "53,3128,9901,10250,80,443,8080"

// allNodes is the link-scope all-nodes multicast group: every IPv6 host on the segment.
var allNodes = net.ParseIP("ff02::1")

// linkLocalEnv is what the route reads of the pod; tests replace it.
type linkLocalEnv struct {
	interfaces func() ([]net.Interface, error)
	addrs      func(net.Interface) ([]net.Addr, error)
	// sysctl reads /proc/sys/net/ipv6/conf/<ifc>/disable_ipv6; ok is false when it cannot.
	sysctl func(ifc string) (disabled bool, exists bool, err error)
}

func hostLinkLocalEnv() linkLocalEnv {
	return linkLocalEnv{
		interfaces: net.Interfaces,
		addrs:      func(i net.Interface) ([]net.Addr, error) { return i.Addrs() },
		sysctl:     readDisableIPv6,
	}
}

func readDisableIPv6(ifc string) (bool, bool, error) {
	if _, err := os.Stat("/proc/sys/net/ipv6"); errors.Is(err, os.ErrNotExist) {
		return true, false, nil // the kernel has no IPv6 at all
	}
	b, err := os.ReadFile(filepath.Join("/proc/sys/net/ipv6/conf", ifc, "disable_ipv6"))
	if err != nil {
		return false, true, err
	}
	return strings.TrimSpace(string(b)) == "1", true, nil
}

// segment is one interface with IPv6 on it.
type segment struct {
	name string
	self []netip.Addr
}

// ipv6Segments finds the interfaces IPv6 could leave by. It returns a denial detail when there
// are none, and an unknown detail when the pod's state cannot be told.
func ipv6Segments(le linkLocalEnv) (segs []segment, self map[netip.Addr]bool, outcome Outcome, detail string) {
	ifs, err := le.interfaces()
	if err != nil {
		return nil, nil, Unknown, "listing interfaces: " + err.Error()
	}
	self = map[netip.Addr]bool{}
	var disabled, pending []string
	for _, ifc := range ifs {
		as, err := le.addrs(ifc)
		if err != nil {
			return nil, nil, Unknown, fmt.Sprintf("addresses of %s: %v", ifc.Name, err)
		}
		var v6 []netip.Addr
		for _, a := range as {
			if ipn, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(ipn.IP); ok {
					self[ip.Unmap()] = true
					if ip.Is6() && !ip.Is4In6() {
						v6 = append(v6, ip)
					}
				}
			}
		}
		if ifc.Flags&net.FlagLoopback != 0 {
			continue // ::1 leaves nowhere
		}
		if len(v6) > 0 {
			if ifc.Flags&net.FlagUp != 0 {
				segs = append(segs, segment{name: ifc.Name, self: v6})
			}
			continue
		}
		off, exists, err := le.sysctl(ifc.Name)
		switch {
		case !exists:
			return nil, self, Denied, "the kernel has no IPv6"
		case err != nil:
			return nil, self, Unknown, fmt.Sprintf("%s has no IPv6 address, and whether IPv6 is disabled on it cannot be read: %v", ifc.Name, err)
		case off:
			disabled = append(disabled, ifc.Name)
		case ifc.Flags&net.FlagUp != 0:
			pending = append(pending, ifc.Name)
		}
	}
	if len(segs) > 0 {
		return segs, self, "", ""
	}
	if len(pending) > 0 {
		return nil, self, Unknown, fmt.Sprintf("IPv6 is enabled on %s but it has no address yet", strings.Join(pending, ", "))
	}
	if len(disabled) == 0 {
		return nil, self, Denied, "no interface but loopback"
	}
	return nil, self, Denied, "IPv6 disabled on " + strings.Join(disabled, ", ")
}

// parsePorts reads "53,3128" or "10250/tcp,30999/udp" (a bare number is TCP).
func parsePorts(s string) ([]portSpec, error) {
	var out []portSpec
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		num, proto, _ := strings.Cut(f, "/")
		if proto == "" {
			proto = "tcp"
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 1 || n > 65535 || (proto != "tcp" && proto != "udp") {
			return nil, fmt.Errorf("%q is not PORT, PORT/tcp or PORT/udp", f)
		}
		out = append(out, portSpec{n, proto})
	}
	return out, nil
}

type portSpec struct {
	port  int
	proto string
}

// tryLinkLocal is one attempt of the link-local route: it returns at the first answer.
func tryLinkLocal(ctx context.Context, le linkLocalEnv, ports []portSpec) (Outcome, string) {
	segs, self, outcome, detail := ipv6Segments(le)
	if len(segs) == 0 {
		return outcome, detail
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex
		answer  string
		errs    []error
		tried   = map[string]bool{}
		wg      sync.WaitGroup
		methods []string
	)
	found := func(s string) {
		mu.Lock()
		if answer == "" {
			answer = s
		}
		mu.Unlock()
		cancel()
	}
	failed := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	other := func(a netip.Addr) bool { return !self[a.Unmap()] }
	dialNeighbour := func(ifc string, a netip.Addr) {
		key := ifc + "|" + a.String()
		mu.Lock()
		if tried[key] {
			mu.Unlock()
			return
		}
		tried[key] = true
		mu.Unlock()
		for _, p := range ports {
			if p.proto != "tcp" {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				addr := net.JoinHostPort(a.WithZone(ifc).String(), strconv.Itoa(p.port))
				var d net.Dialer
				c, err := d.DialContext(ctx, "tcp6", addr)
				if err == nil {
					c.Close()
					found(fmt.Sprintf("%s answered on TCP %d", addr, p.port))
				}
			}()
		}
	}
	var multicasting atomic.Int32 // senders still listening for answers
	for _, s := range segs {
		methods = append(methods, s.name)
		wg.Add(3)
		multicasting.Add(2)
		go func() {
			defer wg.Done()
			defer multicasting.Add(-1)
			if err := echoAllNodes(ctx, s.name, other, func(a netip.Addr) {
				found(fmt.Sprintf("%s answered an ICMPv6 echo to ff02::1%%%s", a.WithZone(s.name), s.name))
			}); err != nil {
				failed(err)
			}
		}()
		go func() {
			defer wg.Done()
			defer multicasting.Add(-1)
			if err := dnsAllNodes(ctx, s.name, other, func(a netip.Addr) {
				found(fmt.Sprintf("%s answered a DNS query to ff02::1%%%s", a.WithZone(s.name), s.name))
			}); err != nil {
				failed(err)
			}
		}()
		go func() {
			defer wg.Done()
			// The neighbour table now, and again once the multicast has had time to draw
			// answers (each answer's sender solicits us first, which puts it in the table).
			for i, wait := range []time.Duration{0, 150 * time.Millisecond, 400 * time.Millisecond} {
				if i > 0 && multicasting.Load() == 0 {
					return // nothing was sent that could draw new neighbours
				}
				if i > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(wait):
					}
				}
				ns, err := neighbours6(s.name)
				if err != nil {
					failed(err)
					return
				}
				for _, a := range ns {
					if other(a) {
						dialNeighbour(s.name, a)
					}
				}
			}
		}()
	}
	// Until an answer, the attempt's end, or every look finished (the sends refused at once by
	// an output rule, say): a denial by rejection costs no waiting.
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-ctx.Done():
	case <-finished:
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if answer != "" {
		return Escaped, answer
	}
	// Nothing answered. Errors that say "denied" (an output rule, no route) are denials;
	// anything else means the segment was not really looked at.
	for _, err := range errs {
		if o, d := Classify(err); o == Unknown {
			return Unknown, "looking at the IPv6 segment: " + d
		}
	}
	return Denied, fmt.Sprintf("no neighbour answered on %s (echo and DNS to ff02::1, %d neighbours on ports %s)", strings.Join(methods, ", "), len(tried), portList(ports))
}

func portList(ports []portSpec) string {
	var s []string
	for _, p := range ports {
		s = append(s, strconv.Itoa(p.port)+"/"+p.proto)
	}
	return strings.Join(s, ",")
}

// echoAllNodes sends one ICMPv6 echo request to ff02::1 on ifc, through an unprivileged ping
// socket if the pod's ping_group_range allows it, else a raw socket if the process may open
// one, and reports every answer from another host. Being allowed neither is not a failure:
// the DNS query and the neighbour table still look.
func echoAllNodes(ctx context.Context, ifc string, other func(netip.Addr) bool, found func(netip.Addr)) error {
	c, err := icmp.ListenPacket("udp6", "::")
	raw := false
	if err != nil {
		c, err = icmp.ListenPacket("ip6:ipv6-icmp", "::")
		raw = true
	}
	if err != nil {
		return nil // neither socket may be opened here: nothing to learn this way
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	msg := icmp.Message{Type: ipv6.ICMPTypeEchoRequest, Body: &icmp.Echo{ID: os.Getpid() & 0xffff, Seq: 1, Data: []byte("af-gate")}}
	b, _ := msg.Marshal(nil)
	var dst net.Addr = &net.UDPAddr{IP: allNodes, Zone: ifc}
	if raw {
		dst = &net.IPAddr{IP: allNodes, Zone: ifc}
	}
	if _, err := c.WriteTo(b, dst); err != nil {
		return err
	}
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		m, err := icmp.ParseMessage(58, buf[:n])
		if err != nil || m.Type != ipv6.ICMPTypeEchoReply {
			continue
		}
		if a, ok := addrOf(from); ok && other(a) {
			found(a)
			return nil
		}
	}
}

// dnsAllNodes sends the gate's DNS query to port 53 of every host on ifc: a resolver that
// listens on all addresses answers from its own link-local address.
func dnsAllNodes(ctx context.Context, ifc string, other func(netip.Addr) bool, found func(netip.Addr)) error {
	c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6unspecified})
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 1500)
	for {
		if _, err := c.WriteTo(dnsQuery, &net.UDPAddr{IP: allNodes, Port: 53, Zone: ifc}); err != nil {
			return err
		}
		// Resend within the attempt: one lost datagram is not a denial.
		_ = c.SetReadDeadline(minTime(time.Now().Add(250*time.Millisecond), deadlineOf(ctx)))
		for {
			_, from, err := c.ReadFrom(buf)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				if isTimeout(err) {
					break
				}
				return err
			}
			if a, ok := addrOf(from); ok && other(a) {
				found(a)
				return nil
			}
		}
	}
}

func addrOf(a net.Addr) (netip.Addr, bool) {
	var ip net.IP
	switch v := a.(type) {
	case *net.UDPAddr:
		ip = v.IP
	case *net.IPAddr:
		ip = v.IP
	default:
		return netip.Addr{}, false
	}
	na, ok := netip.AddrFromSlice(ip)
	return na.Unmap(), ok
}

// neighbours6 lists the IPv6 neighbours the kernel knows on ifc (netlink, no privilege).
func neighbours6(ifc string) ([]netip.Addr, error) {
	ifi, err := net.InterfaceByName(ifc)
	if err != nil {
		return nil, err
	}
	tab, err := syscall.NetlinkRIB(syscall.RTM_GETNEIGH, syscall.AF_INET6)
	if err != nil {
		return nil, fmt.Errorf("reading the neighbour table: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(tab)
	if err != nil {
		return nil, fmt.Errorf("reading the neighbour table: %w", err)
	}
	const ndmsgLen, ndaDst, nudFailed = 12, 1, 0x20
	var out []netip.Addr
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWNEIGH || len(m.Data) < ndmsgLen {
			continue
		}
		index := int(int32(binary.NativeEndian.Uint32(m.Data[4:8])))
		state := binary.NativeEndian.Uint16(m.Data[8:10])
		if index != ifi.Index || state&nudFailed != 0 {
			continue
		}
		for b := m.Data[ndmsgLen:]; len(b) >= 4; {
			l := int(binary.NativeEndian.Uint16(b[0:2]))
			typ := binary.NativeEndian.Uint16(b[2:4])
			if l < 4 || l > len(b) {
				break
			}
			if typ == ndaDst && l == 4+16 {
				out = append(out, netip.AddrFrom16([16]byte(b[4:20])))
			}
			b = b[min((l+3)&^3, len(b)):]
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out, nil
}

// LinkLocal runs one attempt of the link-local route from wherever it is called, on the TCP
// ports given ("" is DefaultLinkLocalPorts), within ctx: the conformance suite's tool runs it
// from inside an environment's instance and, as the control, from outside every environment.
func LinkLocal(ctx context.Context, ports string) (Outcome, string, error) {
	if ports == "" {
		ports = DefaultLinkLocalPorts
	}
	ps, err := parsePorts(ports)
	if err != nil {
		return Unknown, "", err
	}
	o, d := tryLinkLocal(ctx, hostLinkLocalEnv(), ps)
	return o, d, nil
}
