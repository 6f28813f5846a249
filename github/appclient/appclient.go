// Package appclient is the GitHub App's way into GitHub, beside the REST client it hands out
// (github/rest, inside a github/report Reporter): an installation's client (ghinstallation
// mints and refreshes the token, through github/api's rate-limit transport), the App's own JWT
// client (its slug, its installations, a repository's installation), or, for `af reap` in a
// repository without the App, one token. The App and af reap use it; the action has its
// workflow's token and github/api alone.
package appclient

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v62/github"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/github/api"
	"github.com/antifailure/af/github/report"
	"github.com/antifailure/af/github/rest"
)

// Options configure the App's GitHub side. Either AppID and PrivateKey (the App) or Token
// (one repository's token, for af reap) must be set.
type Options struct {
	// APIURL is the REST API's root (https://api.github.com, https://HOST/api/v3 for GitHub
	// Enterprise Server, or a test's stand-in).
	APIURL string
	// AppID and PrivateKey (PEM, PKCS#1 as GitHub issues it, or PKCS#8) are the App's.
	AppID      int64
	PrivateKey []byte
	// Token is used instead of an App.
	Token string
	// Bot is the login af's comments are written as; with an App it is read from GitHub
	// ("<slug>[bot]") when empty, with a token it defaults to github-actions[bot].
	Bot string
	// Authors are other logins whose marked comment is af's: by default the action's.
	Authors []string
	// Base, MaxWait and Sleep are the rate-limit transport's (api.Options).
	Base    http.RoundTripper
	MaxWait time.Duration
	Sleep   func(ctx context.Context, d time.Duration) error
}

// Clients hands out the clients and Reporters of repositories. It is safe for concurrent use.
type Clients struct {
	o     Options
	key   *rsa.PrivateKey
	Stats *api.Stats

	mu       sync.Mutex
	app      *github.Client
	installs map[int64]*github.Client
	repoInst map[string]int64
	token    *github.Client
}

// New checks o and returns the App's GitHub side. A key that does not parse is AF-GH-007.
func New(o Options) (*Clients, error) {
	g := &Clients{o: o, Stats: api.NewStats(), installs: map[int64]*github.Client{}, repoInst: map[string]int64{}}
	if o.Authors == nil {
		g.o.Authors = []string{api.ActionsBot}
	}
	switch {
	case o.AppID > 0 && len(o.PrivateKey) > 0:
		k, err := parseKey(o.PrivateKey)
		if err != nil {
			return nil, failure.New(failure.AppConfigInvalid, "the App's private key: "+err.Error(), err)
		}
		g.key = k
	case o.AppID > 0 || len(o.PrivateKey) > 0:
		return nil, failure.Newf(failure.AppConfigInvalid, "an App needs both its id and its private key (AF_APP_ID and AF_APP_PRIVATE_KEY_FILE); one is missing")
	case o.Token == "":
		return nil, failure.Newf(failure.AppConfigInvalid, "no GitHub credentials: give the App's id and private key, or a token")
	default:
		if g.o.Bot == "" {
			g.o.Bot = api.ActionsBot
		}
	}
	return g, nil
}

// IsApp says whether this is an App's GitHub side rather than one token's.
func (g *Clients) IsApp() bool { return g.key != nil }

func parseKey(b []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("not PEM (GitHub issues it as a .pem file beginning -----BEGIN RSA PRIVATE KEY-----)")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("neither a PKCS#1 nor a PKCS#8 RSA key: %w", err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a PKCS#8 key that is not RSA (GitHub Apps sign with RS256)")
	}
	return rk, nil
}

func (g *Clients) client(auth func(http.RoundTripper) http.RoundTripper, token string) (*github.Client, error) {
	c, _, err := api.New(api.Options{APIURL: g.o.APIURL, Token: token, Base: g.o.Base, MaxWait: g.o.MaxWait, Sleep: g.o.Sleep, Authenticate: auth, Stats: g.Stats})
	if err != nil {
		return nil, failure.New(failure.AppConfigInvalid, fmt.Sprintf("the GitHub API URL %q", g.o.APIURL), err)
	}
	return c, nil
}

func (g *Clients) api() string {
	if g.o.APIURL == "" {
		return "https://api.github.com"
	}
	return strings.TrimRight(g.o.APIURL, "/")
}

// appClient is the client that authenticates as the App itself (its JWT).
func (g *Clients) appClient() (*github.Client, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.app != nil {
		return g.app, nil
	}
	c, err := g.client(func(rt http.RoundTripper) http.RoundTripper {
		atr := ghinstallation.NewAppsTransportFromPrivateKey(rt, g.o.AppID, g.key)
		atr.BaseURL = g.api()
		return atr
	}, "")
	if err != nil {
		return nil, err
	}
	g.app = c
	return c, nil
}

// installation returns the client of installation id, whose token ghinstallation mints and
// refreshes a minute before it expires.
func (g *Clients) installation(id int64) (*github.Client, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c := g.installs[id]; c != nil {
		return c, nil
	}
	c, err := g.client(func(rt http.RoundTripper) http.RoundTripper {
		atr := ghinstallation.NewAppsTransportFromPrivateKey(rt, g.o.AppID, g.key)
		atr.BaseURL = g.api()
		itr := ghinstallation.NewFromAppsTransport(atr, id)
		itr.BaseURL = g.api()
		// Without options ghinstallation sends the body "null", which GitHub's description refuses.
		itr.InstallationTokenOptions = &github.InstallationTokenOptions{}
		return itr
	}, "")
	if err != nil {
		return nil, err
	}
	g.installs[id] = c
	return c, nil
}

// Bot returns the login af's comments are written as, asking GitHub for the App's slug once.
func (g *Clients) Bot(ctx context.Context) (string, error) {
	g.mu.Lock()
	bot := g.o.Bot
	g.mu.Unlock()
	if bot != "" {
		return bot, nil
	}
	c, err := g.appClient()
	if err != nil {
		return "", err
	}
	a, _, err := c.Apps.Get(ctx, "")
	if err != nil {
		return "", appError("reading the App (GET /app) with its JWT", err)
	}
	g.mu.Lock()
	g.o.Bot = a.GetSlug() + "[bot]"
	bot = g.o.Bot
	g.mu.Unlock()
	return bot, nil
}

// Installation returns the App's installation on repository, asking GitHub once per repository.
func (g *Clients) Installation(ctx context.Context, repository string) (int64, error) {
	g.mu.Lock()
	id, ok := g.repoInst[strings.ToLower(repository)]
	g.mu.Unlock()
	if ok {
		return id, nil
	}
	owner, repo, _ := strings.Cut(repository, "/")
	c, err := g.appClient()
	if err != nil {
		return 0, err
	}
	inst, _, err := c.Apps.FindRepositoryInstallation(ctx, owner, repo)
	if err != nil {
		return 0, appError("finding the App's installation on "+repository, err)
	}
	g.mu.Lock()
	g.repoInst[strings.ToLower(repository)] = inst.GetID()
	g.mu.Unlock()
	return inst.GetID(), nil
}

// Forget drops what is cached for repository and installation (0: none) after GitHub refused
// it: the next Reporter looks the installation up again and mints a new token. The sweep's
// repository-to-installation cache would otherwise keep an installation removed or replaced
// (the App reinstalled) until the App restarts.
func (g *Clients) Forget(repository string, installation int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if id, ok := g.repoInst[strings.ToLower(repository)]; ok {
		delete(g.installs, id)
	}
	delete(g.repoInst, strings.ToLower(repository))
	if installation != 0 {
		delete(g.installs, installation)
	}
}

// repoClient is the client for repository: through installation (0: looked up) for an App,
// else the token's.
func (g *Clients) repoClient(ctx context.Context, repository string, installation int64) (*github.Client, error) {
	if g.key == nil {
		g.mu.Lock()
		defer g.mu.Unlock()
		var err error
		if g.token == nil {
			g.token, err = g.client(nil, g.o.Token)
		}
		return g.token, err
	}
	if installation == 0 {
		var err error
		if installation, err = g.Installation(ctx, repository); err != nil {
			return nil, err
		}
	}
	return g.installation(installation)
}

// Repository returns the REST client of repository, through installation (0: looked up).
func (g *Clients) Repository(ctx context.Context, repository string, installation int64) (*rest.Repository, error) {
	c, err := g.repoClient(ctx, repository, installation)
	if err != nil {
		return nil, err
	}
	return rest.New(c, repository)
}

// OpenPulls lists the open pull requests of repository (the reaper's question).
func (g *Clients) OpenPulls(ctx context.Context, repository string) (map[int]bool, error) {
	r, err := g.Repository(ctx, repository, 0)
	if err != nil {
		return nil, err
	}
	return r.OpenPulls(ctx)
}

// Merged says whether pull request n of repository was merged.
func (g *Clients) Merged(ctx context.Context, repository string, n int) (bool, error) {
	r, err := g.Repository(ctx, repository, 0)
	if err != nil {
		return false, err
	}
	return r.Merged(ctx, n)
}

// Reporter returns a Reporter for repository, through installation (0: looked up) for an App.
func (g *Clients) Reporter(ctx context.Context, repository string, installation int64) (*report.Reporter, error) {
	c, err := g.repoClient(ctx, repository, installation)
	if err != nil {
		return nil, err
	}
	bot, err := g.Bot(ctx)
	if err != nil {
		return nil, err
	}
	r, err := report.NewReporter(c, repository, bot)
	if err != nil {
		return nil, err
	}
	r.Authors = g.o.Authors
	return r, nil
}

// Check proves the credentials: with an App, its JWT reads the App and one of its
// installations mints a token; with a token, nothing is asked (a token is checked where used).
func (g *Clients) Check(ctx context.Context) error {
	if g.key == nil {
		return nil
	}
	if _, err := g.Bot(ctx); err != nil {
		return err
	}
	c, err := g.appClient()
	if err != nil {
		return err
	}
	list, _, err := c.Apps.ListInstallations(ctx, &github.ListOptions{PerPage: 1})
	if err != nil {
		return appError("listing the App's installations", err)
	}
	if len(list) == 0 {
		return nil // installed nowhere yet: nothing to mint a token for, nothing to tear down
	}
	ic, err := g.installation(list[0].GetID())
	if err != nil {
		return err
	}
	itr, ok := ic.Client().Transport.(*ghinstallation.Transport)
	if !ok {
		return fmt.Errorf("the installation client has no installation transport")
	}
	if _, err := itr.Token(ctx); err != nil {
		return appError(fmt.Sprintf("minting a token for installation %d", list[0].GetID()), err)
	}
	return nil
}

func appError(what string, err error) error {
	return api.Classify(what, err)
}

// Status is the HTTP status GitHub answered with for err (an API call's, or an installation
// token's), or 0 when err is not such an answer.
func Status(err error) int {
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return er.Response.StatusCode
	}
	var he *ghinstallation.HTTPError
	if errors.As(err, &he) && he.Response != nil {
		return he.Response.StatusCode
	}
	return 0
}

// Gone says whether GitHub answered that what was asked about no longer exists (404, 410).
func Gone(err error) bool {
	s := Status(err)
	return s == http.StatusNotFound || s == http.StatusGone
}
