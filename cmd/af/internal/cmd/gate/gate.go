// Package gate implements `af gate` (the init container in every customer-code pod) and
// `af probe` (the namespace probe's pod): both try every escape route until they have seen
// them all denied, round after round, and print a verdict line the runtime reads.
package gate

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/gate"
)

type options struct {
	addrs    gate.Addresses
	sidecar  string
	rounds   int
	timeout  time.Duration
	interval time.Duration
	deadline time.Duration
	hold     string
	watch    time.Duration
}

// NewCmdGate returns `af gate`.
func NewCmdGate(f *factory.Factory) *cobra.Command {
	return newCmd(f, "gate", true,
		"Keep application code from starting until containment is observed (init container)",
		`Runs in every customer-code pod before the application's containers: it reaches the
sidecar, then tries every escape route until it has seen all of them denied in --rounds
consecutive rounds. With --hold it then waits until the hold address accepts a TCP connection:
af releases it when the pod may start (its dependencies ready, its migration done). Exit 0:
contained (and released), the application may start. Exit 3: a route got out
(named). Exit 4: no answer (the sidecar unreachable, or a route neither denied nor open).`)
}

// NewCmdProbe returns `af probe`.
func NewCmdProbe(f *factory.Factory) *cobra.Command {
	return newCmd(f, "probe", false,
		"Try every escape route from this pod and print the containment verdict",
		`The namespace probe: run in one pod under exactly the rules a service runs under, before
any service image runs. It tries the same routes as the gate and prints the verdict line
(AF-VERDICT {...}) that af up reads. Exit 0 contained, 3 escaped, 4 no answer.

With --watch D, a contained verdict is not the end: the probe checks every route again every D,
for as long as it runs, and prints one verdict line per check with its time ("at"), whatever
the verdict. That is the environment's watch (continuous containment): af status and the App
read its last line. It exits 0 when stopped.`)
}

func newCmd(f *factory.Factory, use string, hidden bool, short, long string) *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:    use,
		Short:  short,
		Long:   long + "\n\nEvery target is a flag, or an environment variable AF_GATE_<FLAG> (AF_GATE_PUBLIC_TCP, ...).\nThe defaults are the production targets; tests point every route at their own hosts.",
		Hidden: hidden,
		Args:   cobra.NoArgs,
		RunE:   func(*cobra.Command, []string) error { return nil },
	}
	fl := cmd.Flags()
	env := func(name string) string {
		return f.Getenv("AF_GATE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")))
	}
	str := func(p *string, name, def, usage string) {
		v := env(name)
		if v == "" {
			v = def
		}
		fl.StringVar(p, name, v, usage)
	}
	str(&o.addrs.PublicTCP, "public-tcp", gate.DefaultPublicTCP, "a public address to connect to over TCP")
	str(&o.addrs.PublicDNS, "public-dns", gate.DefaultPublicDNS, "a public resolver to send a UDP DNS query to")
	str(&o.addrs.Metadata, "metadata", gate.DefaultMetadata, "the cloud metadata endpoint (HTTP)")
	str(&o.addrs.APIServer, "apiserver", "", "the cluster API server (default: KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT)")
	str(&o.addrs.PublicTCP6, "public-tcp6", gate.DefaultPublicTCP6, "the IPv6 public address")
	str(&o.addrs.PublicDNS6, "public-dns6", gate.DefaultPublicDNS6, "the IPv6 public resolver")
	str(&o.addrs.Metadata6, "metadata6", gate.DefaultMetadata6, "the IPv6 metadata endpoint")
	str(&o.addrs.IPv6, "ipv6", "auto", "try the public IPv6 routes: auto (when the pod has a global IPv6 address), on, off; the link-local route is always tried")
	str(&o.addrs.LinkLocalPorts, "link-local-ports", gate.DefaultLinkLocalPorts, "TCP ports tried on every IPv6 neighbour (ff02::1 answers and the neighbour table)")
	str(&o.addrs.Node, "node", "", "the node's own addresses, separated by commas (in a pod: status.hostIPs, one per family); empty leaves the node routes out; the routes at an IPv6 address are named -v6")
	str(&o.addrs.NodePorts, "node-ports", gate.DefaultNodePorts, "ports the node serves, tried at --node: PORT[/tcp|/udp],...; name one in the NodePort range a host listener answers")
	str(&o.addrs.NodeSamplePorts, "node-sample-ports", gate.DefaultNodeSamplePorts, "TCP ports inside the NodePort range where nothing should listen, tried at --node against --node-control-port: the node's own reset on one and a rejection on the other is an exempt range")
	str(&o.addrs.NodeControlPort, "node-control-port", gate.DefaultNodeControlPort, "a TCP port outside the NodePort range where nothing listens, tried at --node beside --node-sample-ports")
	str(&o.sidecar, "sidecar", "", "the sidecar's proxy address (default: AF_SIDECAR, else HTTP_PROXY's host on port 3128)")
	if !hidden {
		fl.DurationVar(&o.watch, "watch", envDur(env("watch"), 0), "after a contained verdict, check every route again every this long and print each verdict line (0: exit after the first)")
	}
	if hidden {
		str(&o.hold, "hold", "", "after a contained verdict, wait until this host:port accepts a TCP connection (af releases it when the pod may start)")
	}
	fl.IntVar(&o.rounds, "rounds", envInt(env("rounds"), 3), "consecutive all-denied rounds needed")
	fl.DurationVar(&o.timeout, "timeout", envDur(env("timeout"), time.Second), "time for each attempt")
	fl.DurationVar(&o.interval, "interval", envDur(env("interval"), 200*time.Millisecond), "time between the starts of rounds (they overlap when an attempt waits out --timeout)")
	fl.DurationVar(&o.deadline, "deadline", envDur(env("deadline"), 60*time.Second), "time for the whole check")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return run(cmd, f, o) }
	return cmd
}

func envInt(s string, def int) int {
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err == nil && n > 0 {
		return n
	}
	return def
}

func envDur(s string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d
	}
	return def
}

func run(cmd *cobra.Command, f *factory.Factory, o *options) error {
	o.addrs.Getenv = f.Getenv
	targets, err := o.addrs.Targets()
	if err != nil {
		return failure.New(failure.UsageInvalid, err.Error(), err)
	}
	sidecar := gate.SidecarAddr(o.sidecar, f.Getenv)
	if sidecar == "" {
		return failure.Newf(failure.UsageInvalid, "no sidecar address: set --sidecar, AF_SIDECAR or HTTP_PROXY")
	}
	if o.rounds < 1 || o.timeout <= 0 || o.deadline <= 0 || o.interval < 0 || o.watch < 0 {
		return failure.Newf(failure.UsageInvalid, "--rounds, --timeout and --deadline must be positive, --interval and --watch not negative")
	}
	cfg := gate.Config{Targets: targets, Sidecar: sidecar, Rounds: o.rounds, Timeout: o.timeout, Interval: o.interval, Deadline: o.deadline}
	if !f.IO.JSON() {
		cfg.Out = f.IO.Out
	}
	res := gate.Check(cmd.Context(), cfg)
	res.At = time.Now().UTC()
	if f.IO.JSON() {
		if err := f.WriteJSON(res); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(f.IO.Out, res.Line())
	}
	switch res.Verdict {
	case gate.Contained:
		f.Infof("contained: every route denied in %d consecutive rounds (%d rounds, %.0f ms, %.0f ms of it waiting for the sidecar)", o.rounds, res.Rounds, res.MS, res.SidecarMS)
		if o.watch > 0 {
			return watch(cmd, f, cfg, o.watch)
		}
		if o.hold == "" {
			return nil
		}
		// The verdict line is out (the runtime reads it); the application waits for its turn.
		hc := gate.HoldConfig{Addr: o.hold, Out: f.IO.ErrOut}
		if !f.IO.JSON() {
			hc.Out = f.IO.Out
		}
		if _, err := gate.Hold(cmd.Context(), hc); err != nil {
			if cmd.Context().Err() != nil {
				return failure.New(failure.Interrupted, "stopped while held: "+err.Error(), err)
			}
			return failure.New(failure.UsageInvalid, err.Error(), err)
		}
		return nil
	case gate.Escape:
		var names []string
		for _, a := range res.Routes {
			if a.Outcome == gate.Escaped {
				names = append(names, fmt.Sprintf("%s to %s", a.Route, a.Target))
			}
		}
		e := failure.Newf(failure.NotContained, "routes got out after %d rounds: %s", res.Rounds, strings.Join(names, ", "))
		return quiet(f, e)
	default:
		e := failure.Newf(failure.NotContained, "containment could not be observed: %s", res.Reason)
		e.Status = gate.ExitCannotAnswer
		return quiet(f, e)
	}
}

// watch checks every route again every interval until stopped, printing each verdict line.
// Only the lines are printed (not each route of each round): a check a minute is a line of a
// few kilobytes, well inside what the kubelet keeps of a container's log. A check that is not
// contained is printed and the watch goes on: the next check says whether it was a moment or
// lasts, and the readers show both.
func watch(cmd *cobra.Command, f *factory.Factory, cfg gate.Config, every time.Duration) error {
	ctx := cmd.Context()
	cfg.Out = nil
	cfg.EscapeEnds = true
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		res := gate.Check(ctx, cfg)
		if ctx.Err() != nil {
			return nil
		}
		res.At = time.Now().UTC()
		if f.IO.JSON() {
			if err := f.WriteJSON(res); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintln(f.IO.Out, res.Line())
	}
}

// quiet returns e already reported when the result was JSON, so nothing more is printed.
func quiet(f *factory.Factory, e *failure.Error) error {
	if f.IO.JSON() {
		return &factory.Reported{Err: e}
	}
	return e
}
