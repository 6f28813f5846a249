// Package appcmd implements `af app serve`: the af GitHub App's webhook server, teardown workers
// and reaper, as the Deployment in deploy/app runs it.
package appcmd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/antifailure/af/app"
	"github.com/antifailure/af/app/clusterstore"
	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/github/appclient"
	"github.com/antifailure/af/settings"
)

// NewCmdApp returns `af app` and its one verb.
func NewCmdApp(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{Use: "app", Short: "Run the af GitHub App", Args: cobra.NoArgs}
	cmd.AddCommand(newCmdServe(f))
	return cmd
}

func newCmdServe(f *factory.Factory) *cobra.Command {
	var logFormat string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the GitHub App's webhook: tear environments down when pull requests close",
		Long: `Serves POST /webhook (GitHub's deliveries, signed with the App's webhook secret) on
AF_APP_LISTEN (:8080), the one port to expose, reading at most AF_APP_MAX_IN_FLIGHT (4)
deliveries at once (a request that finds none free for 10s gets 503); and /healthz, /readyz
(the teardown journal answers: GitHub and the cluster's health are in /metrics and the logs,
not in readiness) and /metrics (Prometheus) on AF_APP_MANAGE_LISTEN (:8081), not to be
exposed. A closed pull request's environments are removed through the Kubernetes runtime's
Down (only namespaces labelled dev.antifailure.managed=true and recorded for that
repository), then af's comment says the environment is gone and the deployment is marked
inactive. A reaper sweeps every AF_APP_REAP_INTERVAL, and once at start, for
environments whose pull request closed without a delivery or whose TTL ran out.

Each teardown is recorded (a ConfigMap in AF_APP_NAMESPACE) before anything is removed, until
GitHub has been told; what SIGTERM cuts short or leaves queued stays recorded, and the next run
(or the next sweep, for one that ran out of attempts) resumes it.

Settings (docs/settings.md): AF_APP_ID, AF_APP_PRIVATE_KEY_FILE, AF_APP_WEBHOOK_SECRET or
AF_APP_WEBHOOK_SECRET_FILE, AF_GITHUB_API_URL, AF_APP_LISTEN, AF_APP_MANAGE_LISTEN,
AF_APP_MAX_IN_FLIGHT, AF_APP_WORKERS, AF_APP_NAMESPACE,
AF_APP_COMMENT_AUTHORS, and the
kubeconfig (or, in a pod, its service account). Logs are JSON lines on stderr, one per event,
each with the delivery id. SIGTERM stops taking deliveries and gives in-flight teardowns 25s.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := settings.App(f.Getenv)
			if err != nil {
				return err
			}
			if s.AppID == 0 || len(s.PrivateKey) == 0 {
				return failure.Newf(failure.AppConfigInvalid, "af app serve needs the App's id and private key (AF_APP_ID, AF_APP_PRIVATE_KEY_FILE)")
			}
			var h slog.Handler
			switch logFormat {
			case "json":
				h = slog.NewJSONHandler(f.IO.ErrOut, nil)
			case "text":
				h = slog.NewTextHandler(f.IO.ErrOut, nil)
			default:
				return failure.Newf(failure.UsageInvalid, "--log-format %q: json or text", logFormat)
			}
			log := slog.New(h)
			// client-go's own lines (throttling, API warnings) as the App's JSON lines too.
			klog.SetSlogLogger(log.With("delivery", "", "source", "client-go"))
			gh, err := appclient.New(appclient.Options{APIURL: s.APIURL, AppID: s.AppID, PrivateKey: s.PrivateKey, Authors: s.Authors, MaxWait: s.RateWait})
			if err != nil {
				return err
			}
			rt, api, err := settings.AppRuntime(f.Getenv, f.Options.Context, func(format string, args ...any) {
				log.Info(fmt.Sprintf(format, args...), "delivery", "")
			})
			if err != nil {
				return err
			}
			cluster, err := app.ClusterOf(rt)
			if err != nil {
				return err
			}
			var journal app.Journal
			var lead func(context.Context, func(context.Context)) error
			if s.Namespace != "" {
				journal = clusterstore.NewRecords(api, s.Namespace, "teardown")
				// Every replica takes deliveries in; the one holding the Lease af-app leads.
				identity := leaseIdentity()
				lead = func(ctx context.Context, run func(context.Context)) error {
					return clusterstore.Lead(ctx, api, s.Namespace, "af-app", identity, clusterstore.LeaseTimes{}, run)
				}
				log.Info("electing a leader with the Lease af-app", "delivery", "", "namespace", s.Namespace, "identity", identity)
			} else {
				log.Warn("AF_APP_NAMESPACE is not set: the teardown journal is kept in memory, so a teardown cut short by a restart after its namespace went leaves its comment as it was", "delivery", "")
			}
			cfg := app.Config{Secret: s.WebhookSecret, Cluster: cluster, GitHub: gh, Workers: s.Workers, ReapInterval: s.ReapInterval, Log: log, Journal: journal,
				MaxInFlight: s.MaxInFlight}
			cfg.Lead = lead
			srv, err := app.New(cfg)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", s.Listen)
			if err != nil {
				srv.Close(cmd.Context())
				return failure.New(failure.AppConfigInvalid, fmt.Sprintf("listening on %s (AF_APP_LISTEN): %v", s.Listen, err), err)
			}
			mln, err := net.Listen("tcp", s.ManageListen)
			if err != nil {
				ln.Close()
				srv.Close(cmd.Context())
				return failure.New(failure.AppConfigInvalid, fmt.Sprintf("listening on %s (AF_APP_MANAGE_LISTEN): %v", s.ManageListen, err), err)
			}
			srv.SetManage(mln)
			return srv.Run(cmd.Context(), ln)
		},
	}
	cmd.Flags().StringVar(&logFormat, "log-format", "json", "log lines as json or text")
	return cmd
}

// leaseIdentity names this process in the leader election: the pod (its host name) and a
// random part, so a restarted container is a new candidate.
func leaseIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "af-app"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "_" + hex.EncodeToString(b)
}
