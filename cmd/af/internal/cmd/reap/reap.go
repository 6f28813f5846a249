// Package reap implements `af reap`: one sweep of the reaper, for a CronJob or a scheduled
// workflow in repositories without the App.
package reap

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/antifailure/af/app"
	"github.com/antifailure/af/cmd/af/internal/envtarget"
	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/gate"
	"github.com/antifailure/af/github/appclient"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/settings"
)

// NewCmdReap returns `af reap`.
func NewCmdReap(f *factory.Factory) *cobra.Command {
	var dryRun bool
	var repository string
	cmd := &cobra.Command{
		Use:   "reap",
		Short: "Remove environments whose pull request is closed or whose TTL ran out",
		Long: `Lists af's environments by their labels (dev.antifailure.managed=true, with the repository,
pull request and expiry af up recorded) and removes those whose time to live has run out, and
those whose pull request is no longer open: GitHub is asked once per repository, 100 open pull
requests to a request, with the App's credentials (AF_APP_ID, AF_APP_PRIVATE_KEY_FILE) or a
token (AF_GITHUB_TOKEN, else GITHUB_TOKEN). Without either, only expired environments go.
Namespaces without af's label are never listed, whatever their name. Where af's comment is
on the pull request it is rewritten to say the environment is gone, and its deployment is
marked inactive.

--dry-run lists what would go and why, and removes nothing. With -o json the sweep is printed
as one JSON object. The exit status is 0 when every removal succeeded, 1 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := settings.App(f.Getenv)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			log := slog.New(slog.DiscardHandler)
			if !f.IO.Quiet() && !f.IO.JSON() {
				log = slog.New(slog.NewTextHandler(f.IO.ErrOut, &slog.HandlerOptions{ReplaceAttr: dropTime}))
			}
			rt, err := cluster(f)
			if err != nil {
				return err
			}
			var gh *appclient.Clients
			switch {
			case s.AppID > 0 || len(s.PrivateKey) > 0 || s.Token != "":
				opts := appclient.Options{APIURL: s.APIURL, AppID: s.AppID, PrivateKey: s.PrivateKey, Authors: s.Authors, MaxWait: s.RateWait}
				if s.AppID == 0 && len(s.PrivateKey) == 0 {
					opts.Token = s.Token
				}
				if gh, err = appclient.New(opts); err != nil {
					return err
				}
			default:
				f.Infof("no GitHub credentials (AF_APP_ID and AF_APP_PRIVATE_KEY_FILE, or AF_GITHUB_TOKEN): only environments whose TTL ran out are removed")
			}
			cl := rt
			if repository != "" {
				cl = onlyRepository{rt, repository}
			}
			reaper := &app.Reaper{Cluster: cl, DryRun: dryRun, Log: log}
			if gh != nil {
				reaper.GitHub = gh
			}
			var q *collect
			if !dryRun {
				x := &app.Teardowner{Cluster: cl, Log: log}
				if gh != nil {
					x.GitHub = gh
				}
				q = &collect{ctx: ctx, run: x.Run}
				reaper.Queue = q
			}
			start := time.Now()
			sw, err := reaper.Sweep(ctx)
			if err != nil {
				return err
			}
			var failed []string
			if q != nil {
				failed = q.failed
			}
			if f.IO.JSON() {
				return errorIf(f.WriteJSON(map[string]any{"sweep": sw, "failed": failed, "elapsed_ms": time.Since(start).Milliseconds()}), failed)
			}
			out := f.IO.Out
			verb := "removed"
			if dryRun {
				verb = "would remove"
			}
			fmt.Fprintf(out, "checked %d environment(s); %s %d\n", sw.Checked, verb, len(sw.Removals))
			for _, r := range sw.Removals {
				fmt.Fprintf(out, "  %-40s %s\n", r.Environment.Namespace, describe(r))
			}
			for _, r := range sw.Kept {
				fmt.Fprintf(out, "  kept %-35s %s\n", r.Environment.Namespace, r.Reason)
			}
			for _, e := range sw.Errors {
				fmt.Fprintf(out, "  not asked: %s\n", e)
			}
			// Containment now: the count by state, and each environment seen escaped.
			states := map[string]int{}
			for _, w := range sw.Watches {
				states[w.State]++
				if w.State == gate.Escape {
					fmt.Fprintf(out, "  NOT CONTAINED %-26s %s\n", w.Namespace, w.Detail)
				}
			}
			if len(states) > 0 {
				var parts []string
				for _, k := range slices.Sorted(maps.Keys(states)) {
					parts = append(parts, fmt.Sprintf("%d %s", states[k], k))
				}
				fmt.Fprintf(out, "watches: %s\n", strings.Join(parts, ", "))
			}
			return errorIf(nil, failed)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be removed and why; remove nothing")
	cmd.Flags().StringVar(&repository, "repository", "", "only environments of this repository (OWNER/NAME), as a scheduled workflow's token can only ask about its own")
	return cmd
}

func describe(r app.Removal) string {
	e := r.Environment
	who := e.Repository
	if e.PullRequest > 0 {
		who = fmt.Sprintf("%s#%d", e.Repository, e.PullRequest)
	}
	return strings.TrimSpace(who + ": " + r.Reason)
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// collect runs each removal the sweep queues, at once and in order, remembering what failed.
type collect struct {
	ctx    context.Context
	run    app.Executor
	failed []string
}

func (c *collect) Enqueue(t app.Teardown) error {
	if err := c.run(c.ctx, t); err != nil {
		c.failed = append(c.failed, fmt.Sprintf("%s: %v", t.Namespace, err))
	}
	return nil
}

func errorIf(err error, failed []string) error {
	if err != nil || len(failed) == 0 {
		return err
	}
	return failure.Newf(failure.TeardownIncomplete, "%d environment(s) could not be removed: %s", len(failed), strings.Join(failed, "; "))
}

// cluster is the Kubernetes runtime from af's settings, or the factory's runtime where a test
// set one (it must list environments, as runtimetest.Fake does).
func cluster(f *factory.Factory) (app.Cluster, error) {
	var rt afruntime.Runtime
	var err error
	if f.Runtime != nil {
		rt, err = f.Runtime(nil)
	} else {
		rt, err = settings.Runtime(f.Getenv, "", f.Options.Context, envtarget.Progress(f))
	}
	if err != nil {
		return nil, err
	}
	return app.ClusterOf(rt)
}

// onlyRepository narrows the cluster's environments to one repository's.
type onlyRepository struct {
	app.Cluster
	repository string
}

func (o onlyRepository) Environments(ctx context.Context, f afruntime.Filter) ([]afruntime.Environment, error) {
	f.Repository = o.repository
	return o.Cluster.Environments(ctx, f)
}
