// Package webhook implements `af webhook trigger`: a signed webhook delivered INTO the
// environment, the way a provider sends it, to exercise a preview's webhook handler.
package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/antifailure/af/cmd/af/internal/envtarget"
	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/failure"
)

// NewCmdWebhook returns `af webhook` and its verb.
func NewCmdWebhook(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{Use: "webhook", Short: "Send webhooks into an environment", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() }}
	cmd.AddCommand(newCmdTrigger(f))
	return cmd
}

func newCmdTrigger(f *factory.Factory) *cobra.Command {
	var fl envtarget.Flags
	var to, provider, secretEnv, event, payload, header string
	cmd := &cobra.Command{
		Use:   "trigger",
		Short: "Send a signed webhook into the environment, as a provider would",
		Long: `Delivers a webhook to one of the environment's services the way the provider sends it, so a
reviewer can exercise the preview's webhook handler:

  af webhook trigger --to web/hooks/github --provider github --secret-env GITHUB_WEBHOOK_SECRET --event push
  af webhook trigger --to web:8080/stripe --provider stripe --secret-env STRIPE_WEBHOOK_SECRET --event payment_intent.succeeded
  af webhook trigger --to worker/hook --provider hmac --header X-Signature --secret-env HOOK_SECRET --payload body.json

Signatures: github sets X-Hub-Signature-256 (HMAC-SHA256 of the body), X-GitHub-Event and a new
X-GitHub-Delivery; stripe sets Stripe-Signature: t=<now>,v1=<HMAC-SHA256 of "t.payload">; hmac
puts the hex HMAC-SHA256 of the body in --header (default X-Signature). The secret is read
from af's own environment variable named by --secret-env and never printed. Without
--payload, af's example payload for the event is sent (--event is required for github and
stripe; each has examples, listed when the event has none).

The delivery goes through the runtime (on Kubernetes a port-forward to a ready instance of the
service). The service's answer is printed: status, headers and body. Exit 0 on a 2xx answer,
AF-RUN-055 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			service, port, path, err := parseTo(to)
			if err != nil {
				return err
			}
			if secretEnv == "" {
				return failure.Newf(failure.UsageInvalid, "--secret-env names the variable that holds the webhook secret; it is required")
			}
			secret := f.Getenv(secretEnv)
			if secret == "" {
				return failure.Newf(failure.UsageInvalid, "the variable %s (--secret-env) is not set or empty", secretEnv)
			}
			body, err := body(provider, event, payload)
			if err != nil {
				return err
			}
			h, err := headers(signed{provider: provider, secret: []byte(secret), event: event, body: body, header: header})
			if err != nil {
				return failure.Newf(failure.UsageInvalid, "--provider: %v", err)
			}
			rt, ref, err := fl.Resolve(cmd.Context(), f)
			if err != nil {
				return err
			}
			obs := rt.Observer()
			if obs == nil || !rt.Capabilities().NetLog {
				return failure.Newf(failure.RuntimeCannot, "af webhook trigger: the %s runtime cannot reach an environment's services", rt.Name())
			}
			link, err := obs.Service(cmd.Context(), ref, service, port)
			if err != nil {
				return err
			}
			defer link.Close()
			return deliver(cmd.Context(), f, link.Addr, path, h, body)
		},
	}
	fl.Add(cmd)
	cmd.Flags().StringVar(&to, "to", "", "SERVICE[:PORT]/PATH the webhook is delivered to")
	cmd.Flags().StringVar(&provider, "provider", providerGitHub, "how to sign: "+strings.Join(providers, ", "))
	cmd.Flags().StringVar(&secretEnv, "secret-env", "", "the environment variable holding the secret")
	cmd.Flags().StringVar(&event, "event", "", "the event (github: X-GitHub-Event; stripe: the event type)")
	cmd.Flags().StringVar(&payload, "payload", "", "a file with the JSON body (- for standard input); default: af's example for --event")
	cmd.Flags().StringVar(&header, "header", "X-Signature", "the signature's header (--provider hmac)")
	return cmd
}

// parseTo reads SERVICE[:PORT]/PATH.
func parseTo(to string) (service string, port int, path string, err error) {
	bad := func(why string) error {
		return failure.Newf(failure.UsageInvalid, "--to %q: %s (SERVICE[:PORT]/PATH, e.g. web/hooks/github)", to, why)
	}
	if to == "" {
		return "", 0, "", bad("required")
	}
	target, rest, _ := strings.Cut(to, "/")
	path = "/" + rest
	service, p, hasPort := strings.Cut(target, ":")
	if service == "" {
		return "", 0, "", bad("no service")
	}
	if hasPort {
		if port, err = strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
			return "", 0, "", bad("the port is not 1-65535")
		}
	}
	return service, port, path, nil
}

func body(provider, event, payload string) ([]byte, error) {
	if (provider == providerGitHub || provider == providerStripe) && event == "" {
		return nil, failure.Newf(failure.UsageInvalid, "--event is required for --provider %s (examples: %s)", provider, strings.Join(events(provider), ", "))
	}
	switch payload {
	case "":
		if event == "" {
			event = "example"
		}
		b, ok := example(provider, event)
		if !ok {
			return nil, failure.Newf(failure.UsageInvalid, "af has no example payload for %s event %q (it has %s): give one with --payload FILE",
				provider, event, strings.Join(events(provider), ", "))
		}
		return b, nil
	case "-":
		return io.ReadAll(io.LimitReader(os.Stdin, 25<<20))
	}
	b, err := os.ReadFile(payload)
	if err != nil {
		return nil, failure.Newf(failure.UsageInvalid, "--payload: %v", err)
	}
	return b, nil
}

func deliver(ctx context.Context, f *factory.Factory, addr, path string, h http.Header, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return failure.Newf(failure.UsageInvalid, "--to path %q: %v", path, err)
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return failure.New(failure.ClusterUnreachable, "delivering the webhook: "+err.Error(), err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if f.IO.JSON() {
		if err := f.WriteJSON(map[string]any{"status": resp.StatusCode, "headers": resp.Header, "body": string(answer), "sent_headers": sentHeaders(h)}); err != nil {
			return err
		}
	} else {
		out := f.IO.Out
		fmt.Fprintf(out, "POST %s → %s\n", path, resp.Status)
		names := make([]string, 0, len(resp.Header))
		for k := range resp.Header {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			fmt.Fprintf(out, "%s: %s\n", k, strings.Join(resp.Header[k], ", "))
		}
		fmt.Fprintf(out, "\n%s", answer)
		if len(answer) > 0 && !bytes.HasSuffix(answer, []byte("\n")) {
			fmt.Fprintln(out)
		}
	}
	if resp.StatusCode/100 != 2 {
		return failure.Newf(failure.WebhookRefused, "the service answered the webhook with %s", resp.Status)
	}
	return nil
}

// sentHeaders are the headers sent, for -o json: the signature is kept (it proves nothing
// without the secret), the secret itself is never among them.
func sentHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for k := range h {
		out[k] = h.Get(k)
	}
	return out
}
