// Package netcmd implements `af net`: what the environment's sidecar decided, read through the
// runtime's link to it (on Kubernetes a port-forward to the sidecar's control port).
package netcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/antifailure/af/cmd/af/internal/envtarget"
	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/cmd/af/internal/iostreams"
	"github.com/antifailure/af/failure"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/sidecar/control"
	"github.com/antifailure/af/sidecar/decisionlog"
	"github.com/antifailure/af/sidecar/policy"
)

// NewCmdNet returns `af net` and its verbs.
func NewCmdNet(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{Use: "net", Short: "Inspect what the environment's sidecar decided", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() }}
	cmd.AddCommand(newCmdLog(f))
	return cmd
}

// FollowEvery is how often --follow asks the sidecar for new decisions.
const FollowEvery = 250 * time.Millisecond

func newCmdLog(f *factory.Factory) *cobra.Command {
	var fl envtarget.Flags
	var blocked, follow bool
	var since, host string
	cmd := &cobra.Command{
		Use:   "log",
		Short: "Show what the environment's sidecar allowed, blocked and captured",
		Long: `Every decision the environment's egress sidecar made, newest last: time, method, host, port,
path (plain HTTP), how it came (proxy, transparent, dns, smtp), the rule and mode, allowed or
not, who asked (from=SERVICE/POD, or the address when no pod of the environment has it),
status, bytes and duration. Then one summary line: allowed, blocked, captured, and the
hosts blocked most.

The sidecar is reached through the runtime: on Kubernetes a port-forward to its control port,
which needs pods/portforward in the environment's namespace (AF-RUN-053 when refused). The
environment's services cannot reach that port.

--blocked keeps refusals only; --since 10m (or an RFC 3339 time) keeps the recent ones; --host
keeps hosts matching a pattern (* and ? as in a shell, e.g. '*.stripe.com'); --follow keeps
printing new decisions until Ctrl-C. With -o json each decision is one JSON object per line,
in the sidecar's own format, and the summary goes to stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if host != "" {
				if _, err := path.Match(host, ""); err != nil {
					return failure.Newf(failure.UsageInvalid, "--host %q is not a pattern: %v", host, err)
				}
			}
			if since != "" {
				if _, err := time.ParseDuration(since); err != nil {
					if _, err := time.Parse(time.RFC3339Nano, since); err != nil {
						return failure.Newf(failure.UsageInvalid, "--since %q: a duration like 10m or an RFC 3339 time", since)
					}
				}
			}
			rt, ref, err := fl.Resolve(cmd.Context(), f)
			if err != nil {
				return err
			}
			link, err := Open(cmd.Context(), rt, ref, "af net log")
			if err != nil {
				return err
			}
			defer link.Close()
			c := &control.Client{Addr: link.Addr}
			p := &printer{f: f, host: host, names: afruntime.NewNamer(rt, ref)}
			err = p.run(cmd.Context(), c, control.LogQuery{Blocked: blocked, Since: since}, follow)
			p.summary()
			if p.names.Err != nil {
				f.Infof("the pods behind the client addresses could not be named: %v", p.names.Err)
			}
			return err
		},
	}
	fl.Add(cmd)
	cmd.Flags().BoolVar(&blocked, "blocked", false, "only what was refused")
	cmd.Flags().StringVar(&since, "since", "", "only decisions since a duration ago (10m) or an RFC 3339 time")
	cmd.Flags().StringVar(&host, "host", "", "only hosts matching this pattern (* and ?)")
	cmd.Flags().BoolVarP(&follow, "follow", "F", false, "keep printing new decisions until interrupted")
	return cmd
}

// Open returns a link to the environment's sidecar, or the runtime's refusal naming it.
func Open(ctx context.Context, rt afruntime.Runtime, ref afruntime.Ref, command string) (*afruntime.Link, error) {
	obs := rt.Observer()
	if obs == nil || !rt.Capabilities().NetLog {
		return nil, failure.Newf(failure.RuntimeCannot, "%s: the %s runtime cannot reach an environment's sidecar", command, rt.Name())
	}
	return obs.Sidecar(ctx, ref)
}

type printer struct {
	f     *factory.Factory
	host  string
	names *afruntime.Namer
	last  uint64
	seen  []decisionlog.Entry
}

func (p *printer) run(ctx context.Context, c *control.Client, q control.LogQuery, follow bool) error {
	for {
		entries, _, err := c.Log(ctx, q)
		if err != nil {
			if follow && ctx.Err() != nil {
				return nil // Ctrl-C ends a follow: not a failure
			}
			return failure.New(failure.ClusterUnreachable, "reading the sidecar's decision log: "+err.Error(), err)
		}
		for _, e := range entries {
			if e.Seq <= p.last && p.last > 0 {
				continue
			}
			p.last = e.Seq
			if p.host != "" {
				if ok, _ := path.Match(strings.ToLower(p.host), strings.ToLower(e.Host)); !ok {
					continue
				}
			}
			e.Service, e.Instance = p.names.Name(ctx, e.Client)
			p.seen = append(p.seen, e)
			p.print(e)
		}
		if !follow {
			return nil
		}
		if len(entries) > 0 {
			// Ask only for what is newer (the same instant again: seq tells them apart).
			q.Since = entries[len(entries)-1].Time.Format(time.RFC3339Nano)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(FollowEvery):
		}
	}
}

func (p *printer) print(e decisionlog.Entry) {
	out := p.f.IO.Out
	if p.f.IO.JSON() {
		b, _ := json.Marshal(e)
		fmt.Fprintf(out, "%s\n", b)
		return
	}
	verdict := p.f.IO.Color(iostreams.Green, "allow  ")
	switch {
	case e.Mode == policy.Capture:
		verdict = p.f.IO.Color(iostreams.Cyan, "capture")
	case !e.Allowed:
		verdict = p.f.IO.Color(iostreams.Red, "block  ")
	}
	target := e.Host
	if e.Port > 0 {
		target = fmt.Sprintf("%s:%d", e.Host, e.Port)
	}
	if e.Path != "" {
		target += e.Path
	}
	method := e.Method
	if method == "" {
		method = "-"
	}
	status := ""
	if e.Status > 0 {
		status = fmt.Sprintf(" %d", e.Status)
	}
	from := ""
	if who := afruntime.Named(e.Service, e.Instance, e.Client); who != "" {
		from = " from=" + who
	}
	fmt.Fprintf(out, "%s %s %-7s %s  rule=%s via=%s%s%s %.1fms in=%dB out=%dB\n", e.Time.Local().Format("15:04:05.000"), verdict, method, target, orDash(e.Rule), e.Via, from, status, e.DurationMS, e.BytesIn, e.BytesOut)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// summary prints N allowed, M blocked, K captured and the hosts blocked most.
func (p *printer) summary() {
	var allowed, blocked, captured int
	top := map[string]int{}
	for _, e := range p.seen {
		switch {
		case e.Mode == policy.Capture:
			captured++
		case e.Allowed:
			allowed++
		default:
			blocked++
			top[e.Host]++
		}
	}
	hosts := make([]string, 0, len(top))
	for h := range top {
		hosts = append(hosts, h)
	}
	sort.Slice(hosts, func(i, j int) bool {
		if top[hosts[i]] != top[hosts[j]] {
			return top[hosts[i]] > top[hosts[j]]
		}
		return hosts[i] < hosts[j]
	})
	if len(hosts) > 5 {
		hosts = hosts[:5]
	}
	line := fmt.Sprintf("%d allowed, %d blocked, %d captured", allowed, blocked, captured)
	if len(hosts) > 0 {
		var parts []string
		for _, h := range hosts {
			parts = append(parts, fmt.Sprintf("%s (%d)", h, top[h]))
		}
		line += "; blocked most: " + strings.Join(parts, ", ")
	}
	if p.f.IO.JSON() {
		if !p.f.IO.Quiet() {
			fmt.Fprintln(p.f.IO.ErrOut, line)
		}
		return
	}
	fmt.Fprintln(p.f.IO.Out, line)
}
