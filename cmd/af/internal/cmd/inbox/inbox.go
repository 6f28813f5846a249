// Package inbox implements `af inbox`: the requests and mail the environment's sidecar
// captured (hosts in capture mode, and its SMTP listener), read through the runtime's link to
// the sidecar.
package inbox

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	netcmd "github.com/antifailure/af/cmd/af/internal/cmd/net"
	"github.com/antifailure/af/cmd/af/internal/envtarget"
	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/failure"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/sidecar/control"
	sidecarinbox "github.com/antifailure/af/sidecar/inbox"
)

// NewCmdInbox returns `af inbox` and its verbs.
func NewCmdInbox(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inbox",
		Short: "List, read and wait for requests and mail the sidecar captured",
		Long: `The environment's sidecar captures what its rules send to capture mode: HTTP requests to a
captured host (answered for the service, never sent on) and mail to its SMTP listener. Header
values that carry credentials (authorization, cookies, tokens, signatures, ...) are never
kept: they read [redacted].

  af inbox list                 every captured item, oldest first
  af inbox show ID              one item: its headers and body
  af inbox wait --to ADDR       wait until mail to ADDR arrives (exit 0), or --timeout (exit 1)

Each takes -o json.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	cmd.AddCommand(newCmdList(f), newCmdShow(f), newCmdWait(f))
	return cmd
}

// with opens the link to the environment's sidecar and runs use with a client of its
// control API, closing the link after.
func with(cmd *cobra.Command, f *factory.Factory, fl *envtarget.Flags, name string, use func(ctx context.Context, c *control.Client, names *afruntime.Namer) error) error {
	rt, ref, err := fl.Resolve(cmd.Context(), f)
	if err != nil {
		return err
	}
	link, err := netcmd.Open(cmd.Context(), rt, ref, name)
	if err != nil {
		return err
	}
	defer link.Close()
	names := afruntime.NewNamer(rt, ref)
	err = use(cmd.Context(), &control.Client{Addr: link.Addr}, names)
	if names.Err != nil {
		f.Infof("the pods behind the senders' addresses could not be named: %v", names.Err)
	}
	return err
}

func sidecarError(err error) error {
	if err == nil || failure.As(err) != nil {
		return err
	}
	return failure.New(failure.ClusterUnreachable, "reading the sidecar's inbox: "+err.Error(), err)
}

func newCmdList(f *factory.Factory) *cobra.Command {
	var fl envtarget.Flags
	var q control.InboxQuery
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List what the sidecar captured, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return with(cmd, f, &fl, "af inbox list", func(ctx context.Context, c *control.Client, names *afruntime.Namer) error {
				ms, err := c.Inbox(ctx, q)
				if err != nil {
					return sidecarError(err)
				}
				for i := range ms {
					ms[i].Service, ms[i].Instance = names.Name(ctx, ms[i].Client)
				}
				if f.IO.JSON() {
					return f.WriteJSON(map[string]any{"messages": ms})
				}
				if len(ms) == 0 {
					fmt.Fprintln(f.IO.Out, "the inbox is empty")
					return nil
				}
				for _, m := range ms {
					fmt.Fprintln(f.IO.Out, line(m))
				}
				return nil
			})
		},
	}
	fl.Add(cmd)
	addQuery(cmd, &q)
	return cmd
}

func addQuery(cmd *cobra.Command, q *control.InboxQuery) {
	cmd.Flags().StringVar(&q.Kind, "kind", "", "only http or smtp")
	cmd.Flags().StringVar(&q.To, "to", "", "only mail to this address")
	cmd.Flags().StringVar(&q.Host, "host", "", "only requests to this host")
	cmd.Flags().StringVar(&q.Subject, "subject", "", "only mail whose subject contains this")
}

// line is one item in a list, ending with who sent it when known.
func line(m sidecarinbox.Message) string {
	when := m.Time.Local().Format("15:04:05")
	sender := ""
	if who := afruntime.Named(m.Service, m.Instance, m.Client); who != "" {
		sender = "  sent by " + who
	}
	if m.Kind == "smtp" {
		return fmt.Sprintf("%s  %s  mail  from %s to %s: %s%s", m.ID, when, m.From, strings.Join(m.To, ", "), m.Subject, sender)
	}
	return fmt.Sprintf("%s  %s  %-4s  %s %s%s (%d bytes)%s", m.ID, when, m.Kind, m.Method, m.Host, m.Path, len(m.Body), sender)
}

func newCmdShow(f *factory.Factory) *cobra.Command {
	var fl envtarget.Flags
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one captured request or mail: headers (credentials redacted) and body",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return with(cmd, f, &fl, "af inbox show", func(ctx context.Context, c *control.Client, names *afruntime.Namer) error {
				m, err := c.Message(ctx, args[0])
				if err != nil {
					return sidecarError(err)
				}
				m.Service, m.Instance = names.Name(ctx, m.Client)
				return show(f, m)
			})
		},
	}
	fl.Add(cmd)
	return cmd
}

// show prints one item: as JSON with -o json, else its line, headers and body.
func show(f *factory.Factory, m *sidecarinbox.Message) error {
	if f.IO.JSON() {
		return f.WriteJSON(m)
	}
	out := f.IO.Out
	fmt.Fprintln(out, line(*m))
	names := make([]string, 0, len(m.Header))
	for k := range m.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range m.Header[k] {
			fmt.Fprintf(out, "%s: %s\n", k, v)
		}
	}
	fmt.Fprintln(out)
	fmt.Fprint(out, m.Body)
	if !strings.HasSuffix(m.Body, "\n") {
		fmt.Fprintln(out)
	}
	if m.BodyTruncated {
		fmt.Fprintln(out, "[the body was cut at the sidecar's limit]")
	}
	return nil
}

func newCmdWait(f *factory.Factory) *cobra.Command {
	var fl envtarget.Flags
	var q control.InboxQuery
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait",
		Short: "Wait until a matching request or mail arrives: exit 0, or 1 after --timeout",
		Long: `Waits until the sidecar captures an item matching --to (mail to an address), --host (a request
to a host), --subject or --kind, and prints it; an item already there counts. It exits 0 when
one arrives, and 1 with AF-RUN-054 when none has after --timeout (default 60s, at most 5m).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if q == (control.InboxQuery{}) {
				return failure.Newf(failure.UsageInvalid, "af inbox wait needs --to, --host, --subject or --kind: what to wait for")
			}
			if timeout <= 0 || timeout > control.MaxWait {
				return failure.Newf(failure.UsageInvalid, "--timeout %s: from 1s to %s", timeout, control.MaxWait)
			}
			return with(cmd, f, &fl, "af inbox wait", func(ctx context.Context, c *control.Client, names *afruntime.Namer) error {
				m, err := c.Wait(ctx, q, "", timeout)
				if errors.Is(err, control.ErrNoMessage) {
					return failure.Newf(failure.NothingArrived, "nothing matching arrived in the inbox within %s", timeout)
				}
				if err != nil {
					return sidecarError(err)
				}
				m.Service, m.Instance = names.Name(ctx, m.Client)
				return show(f, m)
			})
		},
	}
	fl.Add(cmd)
	addQuery(cmd, &q)
	cmd.Flags().DurationVar(&timeout, "timeout", 60*time.Second, "how long to wait")
	return cmd
}
