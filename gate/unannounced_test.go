package gate

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/internal/testnet"
)

// TestWhoAnswersOnTheKernel: what this kernel really sends back for each way a node can turn
// a connection away, seen from a pod: the facts the route rests on.
func TestWhoAnswersOnTheKernel(t *testing.T) {
	n := testnet.New(t)
	node := n.Router("node")
	pod := node.Attach("pod")
	ln := node.Listen(":31001")
	defer ln.Close()
	acceptAndClose(ln)
	node.Nft(`table inet fw {
	chain in {
		type filter hook input priority 0; policy accept;
		tcp dport 31003 reject
		tcp dport 31004 reject with icmp type admin-prohibited
		tcp dport 31005 drop
		tcp dport 31006 reject with tcp reset
	}
}`)
	cases := []struct {
		port        uint16
		kind        string
		detail, why string
	}{
		{31001, AnswerAccepted, "", "a listener"},
		{31002, AnswerReset, "", "closed, the node's own stack answers"},
		{31003, AnswerICMP, "type 3 code 3", "a firewall's reject (port unreachable), refused to connect(2) like a reset"},
		{31004, AnswerICMP, "type 3 code 13", "a firewall's reject (administratively prohibited)"},
		{31005, AnswerSilence, "", "a firewall's drop"},
		{31006, AnswerReset, "", "a firewall's reject with a TCP reset: the same as the node's own"},
	}
	for _, c := range cases {
		var r Reply
		err := pod.Do(func() (err error) {
			r, err = WhoAnswers(context.Background(), netip.AddrPortFrom(node.Addr, c.port), 500*time.Millisecond)
			return err
		})
		if err != nil {
			t.Fatalf("port %d: %v", c.port, err)
		}
		if r.Kind != c.kind || !strings.Contains(r.Detail, c.detail) {
			t.Errorf("port %d (%s): %+v, want %s %q", c.port, c.why, r, c.kind, c.detail)
		}
	}
	// Local errors: the pod's own firewall stops the packet before it leaves.
	pod.Nft("table inet own {\n\tchain out {\n\t\ttype filter hook output priority 0; policy accept;\n\t\ttcp dport 31007 drop\n\t}\n}")
	var r Reply
	if err := pod.Do(func() (err error) {
		r, err = WhoAnswers(context.Background(), netip.AddrPortFrom(node.Addr, 31007), 300*time.Millisecond)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if r.Kind != AnswerLocal && r.Kind != AnswerSilence {
		t.Errorf("a drop in the pod's own output: %+v, want local or silence", r)
	}
	t.Logf("the pod's own drop: %+v", r)
}

// TestWhoAnswersOnLoopback: both families, on this machine's loopback only.
func TestWhoAnswersOnLoopback(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		host := "127.0.0.1"
		if network == "tcp6" {
			host = "::1"
		}
		ln, err := net.Listen(network, net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatalf("%s: %v", network, err)
		}
		open := netip.MustParseAddrPort(ln.Addr().String())
		// A port just freed: nothing listens there.
		ln2, err := net.Listen(network, net.JoinHostPort(host, "0"))
		if err != nil {
			t.Fatal(err)
		}
		closed := netip.MustParseAddrPort(ln2.Addr().String())
		ln2.Close()
		for _, c := range []struct {
			at   netip.AddrPort
			want string
		}{{open, AnswerAccepted}, {closed, AnswerReset}} {
			r, err := WhoAnswers(context.Background(), c.at, time.Second)
			if err != nil || r.Kind != c.want {
				t.Errorf("%s: %+v %v, want %s", c.at, r, err, c.want)
			}
		}
		ln.Close()
	}
}

func TestJudgeUnannounced(t *testing.T) {
	icmp := Reply{Kind: AnswerICMP, Detail: "ICMP type 3 code 3"}
	rst := Reply{Kind: AnswerReset}
	quiet := Reply{Kind: AnswerSilence}
	open := Reply{Kind: AnswerAccepted}
	local := Reply{Kind: AnswerLocal, Detail: "operation not permitted"}
	cases := []struct {
		name    string
		control Reply
		samples []Reply
		want    Outcome
		detail  string
	}{
		{"rejected everywhere with ICMP", icmp, []Reply{icmp, icmp}, Denied, "no difference"},
		{"dropped everywhere", quiet, []Reply{quiet, quiet}, Denied, "no difference"},
		{"ICMP limited to silence on some", quiet, []Reply{icmp, quiet}, Denied, "no difference"},
		{"rejected everywhere with a reset", rst, []Reply{rst, rst}, Denied, "a reset everywhere"},
		{"stopped in the pod", local, []Reply{local, local}, Denied, "local error"},
		{"the range exempt, the rest rejected", icmp, []Reply{rst, rst}, Escaped, "port 30000 got the node's own reset where port 29999 got ICMP"},
		{"the range exempt, the rest dropped", quiet, []Reply{icmp, rst}, Escaped, "port 32765 got the node's own reset where port 29999 got silence"},
		{"a listener on a sample", quiet, []Reply{quiet, open}, Escaped, "port 32765 accepted"},
		{"a listener on the control", open, []Reply{quiet, quiet}, Escaped, "port 29999 (outside the NodePort range) accepted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, detail := judgeUnannounced(29999, c.control, []int{30000, 32765}, c.samples)
			if got != c.want || !strings.Contains(detail, c.detail) {
				t.Errorf("%s %q, want %s containing %q", got, detail, c.want, c.detail)
			}
		})
	}
}

func TestUnannouncedTarget(t *testing.T) {
	for _, c := range []struct {
		node, samples, control string
		want, err              string
	}{
		{"10.0.0.1", "30000,32765", "29999", "10.0.0.1:30000,32765 vs 29999", ""},
		{"fd00::1", "30000", "29999", "[fd00::1]:30000 vs 29999", ""},
		{"node-a", "30000", "29999", "", `node "node-a" is not an IP address`},
		{"10.0.0.1", "30000/udp", "29999", "", "only TCP"},
		{"10.0.0.1", " , ", "29999", "", "none named"},
		{"10.0.0.1", "30000", "70000", "", `control port "70000"`},
		{"10.0.0.1", "30000,29999", "29999", "", "also a sample port"},
	} {
		tg, err := unannouncedTarget(c.node, c.samples, c.control)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: err %v, want %q", c, err, c.err)
			}
			continue
		}
		if err != nil || tg.Addr != c.want || tg.Route != RouteNodeUnannounced {
			t.Errorf("%v: %+v %v", c, tg, err)
		}
	}
}
