// Package appcmd implements `af app serve`: the af GitHub App's webhook server, teardown workers
// and reaper, as the Deployment in deploy/app runs it.
package appcmd

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/antifailure/af/app"
	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/failure"
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
		Long: `Serves POST /webhook (GitHub's deliveries, signed with the App's webhook secret), /healthz,
/readyz (the cluster answers and the App's key mints an installation token) and /metrics
(Prometheus) on AF_APP_LISTEN. A closed pull request's environments are removed through the
Kubernetes runtime's Down (only namespaces labelled dev.antifailure.managed=true and recorded
for that repository), then af's comment says the environment is gone and the deployment is
marked inactive. A reaper sweeps every AF_APP_REAP_INTERVAL, and once at start, for
environments whose pull request closed without a delivery or whose TTL ran out.

Each teardown is recorded (a ConfigMap in AF_APP_NAMESPACE) before anything is removed, until
GitHub has been told; what SIGTERM cuts short or leaves queued stays recorded, and the next run
(or the next sweep, for one that ran out of attempts) resumes it.

Settings (docs/settings.md): AF_APP_ID, AF_APP_PRIVATE_KEY_FILE, AF_APP_WEBHOOK_SECRET or
AF_APP_WEBHOOK_SECRET_FILE, AF_GITHUB_API_URL, AF_APP_WORKERS, AF_APP_NAMESPACE,
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
			gh, err := app.NewGitHub(app.GitHubOptions{APIURL: s.APIURL, AppID: s.AppID, PrivateKey: s.PrivateKey, Authors: s.Authors, MaxWait: s.RateWait})
			if err != nil {
				return err
			}
			rt, err := settings.NewKubernetes(f.Getenv, f.Options.Context, func(format string, args ...any) {
				log.Info(fmt.Sprintf(format, args...), "delivery", "")
			})
			if err != nil {
				return err
			}
			var journal app.Journal
			if s.Namespace != "" {
				journal = rt.Records(s.Namespace, "teardown")
			} else {
				log.Warn("AF_APP_NAMESPACE is not set: the teardown journal is kept in memory, so a teardown cut short by a restart after its namespace went leaves its comment as it was", "delivery", "")
			}
			srv, err := app.New(app.Config{Secret: s.WebhookSecret, Cluster: rt, GitHub: gh, Workers: s.Workers, ReapInterval: s.ReapInterval, Log: log, Journal: journal})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", s.Listen)
			if err != nil {
				srv.Close(cmd.Context())
				return failure.New(failure.AppConfigInvalid, fmt.Sprintf("listening on %s (AF_APP_LISTEN): %v", s.Listen, err), err)
			}
			return srv.Run(cmd.Context(), ln)
		},
	}
	cmd.Flags().StringVar(&logFormat, "log-format", "json", "log lines as json or text")
	return cmd
}
