package action_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/antifailure/af/github/githubtest"
	"github.com/antifailure/af/github/report"
	"github.com/antifailure/af/images"
	"github.com/antifailure/af/images/engine"
	"github.com/antifailure/af/internal/afbuild"
	"github.com/antifailure/af/internal/testreq"
	"github.com/antifailure/af/testcluster"
	"github.com/antifailure/af/version"
)

// ActVersion is the nektos/act release the runner tests use.
const ActVersion = "v0.2.89"

// act returns the act binary, installing it through the module proxy into the cache once.
func act(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(githubtest.Cache(), "act-"+ActVersion)
	bin := filepath.Join(dir, "act")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	t.Logf("installing nektos/act %s into %s (about 3.5 minutes, once)", ActVersion, dir)
	cmd := exec.Command("go", "install", "github.com/nektos/act@"+ActVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	cmd.Dir = os.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install nektos/act: %v\n%s", err, out)
	}
	return bin
}

// actEnv is what every act run of a test shares: the test cluster, the private daemon with
// the action's image loaded, act itself, the example's images, and the environment and
// secrets a workflow run gets.
type actEnv struct {
	h          *testcluster.Handle
	ctx        context.Context
	actBin     string
	work       string
	dockerHost string
	kubeconfig string
	*actShared
	env map[string]string // the job's environment (besides GITHUB_API_URL)
	// localRepos stand in for actions from elsewhere: owner/name@ref → a local directory
	// (act's --local-repository), so a workflow runs with its uses: lines as written.
	localRepos map[string]string
}

// actShared is what the act tests of one process share, made by the first that needs it:
// the engine image on the node, the action's image in the daemon, the example's binaries and
// web's image on the node. Made for each test, it took 35 s of each one's time.
type actShared struct {
	dir          string // the binaries; removed by TestMain
	webImage     string
	webPath      string // web's static binary
	workerBinary []byte
	workerPath   string // the worker's static binary
	// manifest is the example's af.yaml, its worker built from worker-image/ (the binary).
	manifest string
}

var shared struct {
	once sync.Once
	val  *actShared
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.val != nil {
		_ = os.RemoveAll(shared.val.dir)
	}
	os.Exit(code)
}

func newActEnv(t *testing.T, enforcing bool) *actEnv {
	h := testcluster.Require(t)
	dockerHost := os.Getenv("AF_DOCKER_HOST")
	if dockerHost == "" {
		testreq.Elsewhere(t, "needs a container daemon; make test starts one and sets AF_DOCKER_HOST")
	}
	if enforcing {
		h.RequireState(t, testcluster.StateEnforcing)
	} else {
		h.RequireState(t, testcluster.StateNoEnforcer) // the negative control's cause
	}
	if h.IngressHTTP == "" {
		testreq.Missing(t, "the cluster runs without its ingress controller")
	}
	a := &actEnv{h: h, actBin: act(t), work: t.TempDir(), dockerHost: dockerHost}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	t.Cleanup(cancel)
	a.ctx = ctx
	shared.once.Do(func() { shared.val, shared.err = makeActShared(ctx, t, h, dockerHost) })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	a.actShared = shared.val

	// A kubeconfig secret is self-contained: the action's container sees none of the runner's files.
	var err error
	if a.kubeconfig, err = h.Kubectl(ctx, "", "config", "view", "--flatten", "--raw"); err != nil {
		t.Fatal(err)
	}
	a.env = map[string]string{
		"AF_ENGINE_IMAGE":    version.LocalEngineImage,
		"AF_INGRESS_ADDRESS": h.IngressHTTP,
		"AF_URL_SCHEME":      "http",
		"WEB_IMAGE":          a.webImage,
		"REGISTRY":           h.Registry + "/af-act",
	}
	for k, v := range h.GateEnv() {
		a.env[k] = v
	}
	return a
}

// makeActShared makes what the act tests share, logging each step's time on t (the first test).
func makeActShared(ctx context.Context, t *testing.T, h *testcluster.Handle, dockerHost string) (*actShared, error) {
	lap := time.Now()
	took := func(what string) {
		t.Logf("shared setup: %s: %s", what, time.Since(lap).Round(100*time.Millisecond))
		lap = time.Now()
	}
	if err := h.ImportEngineImage(ctx, ".."); err != nil {
		return nil, err
	}
	took("engine image on the node")
	dir, err := os.MkdirTemp("", "af-act-shared")
	if err != nil {
		return nil, err
	}
	sh := &actShared{dir: dir}

	// The action's image, as the release writes it, loaded into the daemon act uses.
	b, err := os.ReadFile(afbuild.Binary(t))
	if err != nil {
		return nil, err
	}
	img, err := engine.ActionImage(b, version.EngineDigest)
	if err != nil {
		return nil, err
	}
	archive := filepath.Join(dir, "action.tar")
	if err := images.WriteArchive(archive, version.ActionImage, img); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "docker", "load", "--input", archive)
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+dockerHost)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("docker load: %w\n%s", err, out)
	}
	_ = os.Remove(archive)
	took("the action's image in the daemon")

	// The example's two services, from their static binaries. web is on the node already, given
	// through the images input (as an earlier build step would give it); worker is built by the
	// action itself, inside its container, through the runner's Docker socket (the Engine API:
	// the image has no docker CLI).
	bins := map[string]string{}
	for _, svc := range []string{"web", "worker"} {
		out := filepath.Join(dir, "shop-"+svc)
		if err := afbuild.Build(ctx, "../examples/shop", out, afbuild.Package("./"+svc)); err != nil {
			return nil, err
		}
		bins[svc] = out
	}
	sh.webImage = fmt.Sprintf("af.local/shop-web:act-%d", time.Now().UnixNano())
	if err := h.ImportBinaryImage(ctx, sh.webImage, bins["web"]); err != nil {
		return nil, err
	}
	took("the example's images")
	sh.webPath, sh.workerPath = bins["web"], bins["worker"]
	if sh.workerBinary, err = os.ReadFile(bins["worker"]); err != nil {
		return nil, err
	}
	example, err := os.ReadFile("../examples/shop/af.yaml")
	if err != nil {
		return nil, err
	}
	sh.manifest = strings.Replace(string(example), "      context: .\n      dockerfile: worker/Dockerfile\n", "      context: worker-image\n", 1)
	if sh.manifest == string(example) {
		return nil, errors.New("the example's worker build is not where the test expects it")
	}
	return sh, nil
}

// repository writes files as a git repository of acme/shop under the work directory.
func (a *actEnv) repository(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	repo := filepath.Join(a.work, name)
	for name, content := range files {
		p := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(filepath.Base(name), "shop-") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@t.test", "commit", "-q", "-m", "x"},
		{"remote", "add", "origin", "https://github.com/acme/shop.git"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return repo
}

// run runs workflow of repo under act for event (its payload), against the stand-in gh, with
// the secrets given and env besides a.env; it returns act's output.
func (a *actEnv) run(t *testing.T, gh *githubtest.Server, repo, workflow, event string, payload []byte, secrets, env map[string]string) (string, error) {
	t.Helper()
	return a.runWith(t, gh, repo, workflow, event, payload, secrets, env, false)
}

// runWith is run, with env instead of a.env when only is set.
func (a *actEnv) runWith(t *testing.T, gh *githubtest.Server, repo, workflow, event string, payload []byte, secrets, env map[string]string, only bool) (string, error) {
	t.Helper()
	ev := filepath.Join(a.work, fmt.Sprintf("event-%s-%d.json", event, time.Now().UnixNano()))
	if err := os.WriteFile(ev, payload, 0o644); err != nil {
		t.Fatal(err)
	}
	cache, home := filepath.Join(a.work, "act-cache"), filepath.Join(a.work, "home")
	// The runner mounts its Docker socket into container actions at /var/run/docker.sock; act
	// also hands the container its own DOCKER_HOST, so the socket is at that path too.
	sock := strings.TrimPrefix(a.dockerHost, "unix://")
	args := []string{event, "-W", workflow, "-e", ev,
		"-P", "ubuntu-latest=-self-hosted", "--pull=false", "--no-cache-server",
		"--action-cache-path", cache, "--container-options", fmt.Sprintf("-v %s:%s -v %s:%s -v %s:/var/run/docker.sock -v %s:%s --network host", cache, cache, a.work, a.work, sock, sock, sock),
		"--container-daemon-socket", "-", "--env", "GITHUB_API_URL=" + gh.URL}
	for k, v := range secrets {
		args = append(args, "-s", k+"="+v)
	}
	for k, v := range a.localRepos {
		args = append(args, "--local-repository", k+"="+v)
	}
	envs := []map[string]string{a.env, env}
	if only {
		envs = envs[1:]
	}
	for _, m := range envs {
		for k, v := range m {
			args = append(args, "--env", k+"="+v)
		}
	}
	cmd := exec.CommandContext(a.ctx, a.actBin, args...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+a.dockerHost, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_CACHE_HOME="+filepath.Join(home, ".cache"))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("act %s %s: %s", event, workflow, time.Since(start).Round(100*time.Millisecond))
	for _, secret := range secrets {
		if len(secret) > 8 && strings.Contains(string(out), secret) {
			t.Errorf("act's output shows a secret")
		}
	}
	if strings.Contains(string(out), "client-key-data: LS0") {
		t.Errorf("act's output shows the kubeconfig")
	}
	return string(out), err
}

// previewAnswers fails t unless host's preview answers /healthz with 200 through the ingress
// controller.
func (a *actEnv) previewAnswers(t *testing.T, host string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(a.ctx, http.MethodGet, "http://"+a.h.IngressHTTP+"/healthz", nil)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s through the ingress controller: %v %v", host, err, resp)
	}
	resp.Body.Close()
}

// actRepo is a repository run by act against the stand-in and the test cluster.
type actRepo struct {
	gh  *githubtest.Server
	h   *testcluster.Handle
	ctx context.Context
	run func(command, action, sha string) (string, error)
}

func newActRepo(t *testing.T, enforcing bool) *actRepo {
	a := newActEnv(t, enforcing)
	// A repository: the action (this one's action.yml), the example's manifest and a workflow.
	ayml, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"action.yml":               string(ayml),
		"af.yaml":                  a.manifest,
		"worker-image/Dockerfile":  "FROM scratch\nCOPY shop-worker /shop-worker\nUSER 65532:65532\nENTRYPOINT [\"/shop-worker\"]\n",
		"worker-image/shop-worker": string(a.workerBinary),
		".github/workflows/preview.yml": `name: preview
on: [pull_request]
jobs:
  preview:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - id: af
        uses: ./
        with:
          command: ${{ env.AF_COMMAND }}
          kubeconfig: ${{ secrets.KUBECONFIG }}
          token: ${{ secrets.GITHUB_TOKEN }}
          registry: ${{ env.REGISTRY }}
          images: |
            web=${{ env.WEB_IMAGE }}
      - if: always()
        run: echo "read by a later step url=${{ steps.af.outputs.url }} contained=${{ steps.af.outputs.contained }} namespace=${{ steps.af.outputs.namespace }}"
`,
	}
	repo := a.repository(t, "repo", files)
	const tok = "ghs_act_token_0123456789abcdef"
	gh := githubtest.New(t, tok)
	gh.SetFile("main", "af.yaml", files["af.yaml"])
	runAct := func(command, action, sha string) (string, error) {
		t.Helper()
		return a.run(t, gh, repo, ".github/workflows/preview.yml", "pull_request", githubtest.PullRequestEvent(t, action, "acme/shop", 21, sha, false),
			map[string]string{"GITHUB_TOKEN": tok, "KUBECONFIG": a.kubeconfig},
			map[string]string{"AF_COMMAND": command, "AF_INGRESS_CONTROLLER": "af-ingress/app.kubernetes.io/name=traefik"})
	}
	t.Cleanup(func() {
		if out, err := runAct("down", "closed", strings.Repeat("e", 40)); err != nil {
			t.Errorf("act, the cleanup's down: %v\n%s", err, out)
		}
	})
	return &actRepo{gh: gh, h: a.h, ctx: a.ctx, run: runAct}
}

// TestActionUnderAct runs the action as a workflow step under nektos/act, the container being
// the action's own image (written by af's image writer and loaded into the private daemon,
// exactly what action.yml names), against the GitHub stand-in and the real test cluster: a
// pull request opened, a new push, and the pull request closed.
func TestActionUnderAct(t *testing.T) {
	r := newActRepo(t, true)
	gh, h, ctx, runAct := r.gh, r.h, r.ctx, r.run
	sha1, sha2 := strings.Repeat("a", 40), strings.Repeat("c", 40)
	out, err := runAct("up", "opened", sha1)
	if err != nil {
		t.Fatalf("act, pull request opened: %v\n%s", err, out)
	}
	c := gh.Comments(21)
	if len(c) != 1 || !strings.Contains(c[0].Body, "Preview ready") || !strings.Contains(c[0].Body, "http://shop-pr-21-web.preview.af.test/") {
		t.Fatalf("comments %+v\n%s", c, out)
	}
	for _, route := range []string{"tcp-public", "udp-dns", "metadata", "apiserver"} {
		if !strings.Contains(c[0].Body, "| "+route+" | denied") {
			t.Errorf("the comment does not show %s denied:\n%s", route, c[0].Body)
		}
	}
	if cr := gh.CheckRuns(); len(cr) != 1 || cr[0].HeadSHA != sha1 || cr[0].Conclusion != "success" {
		t.Fatalf("check runs %+v", cr)
	}
	d := gh.Deployments()
	if len(d) != 1 || d[0].Statuses[len(d[0].Statuses)-1].EnvironmentURL != "http://shop-pr-21-web.preview.af.test/" {
		t.Fatalf("deployments %+v", d)
	}
	if !strings.Contains(out, "read by a later step url=http://shop-pr-21-web.preview.af.test/ contained=true namespace=af-env-shop-pr-21") {
		t.Errorf("a later step did not read the outputs:\n%s", out)
	}
	for _, want := range []string{"build worker: Engine API POST /build", "images: worker is " + h.Registry + "/af-act/shop/worker@sha256:"} {
		if !strings.Contains(out, want) {
			t.Errorf("the action did not build and push worker through the socket (%q):\n%s", want, out)
		}
	}
	// act shows the step summary the action appended to GITHUB_STEP_SUMMARY.
	if !strings.Contains(out, "Summary - ## ✅ Preview ready: shop-pr-21") {
		t.Errorf("act shows no step summary saying the preview is ready:\n%s", out)
	}
	if !strings.Contains(out, "***") {
		t.Errorf("act's output shows no masked value")
	}

	out, err = runAct("up", "synchronize", sha2)
	if err != nil {
		t.Fatalf("act, synchronize: %v\n%s", err, out)
	}
	if c2 := gh.Comments(21); len(c2) != 1 || c2[0].ID != c[0].ID || !strings.Contains(c2[0].Body, "ccccccc") {
		t.Fatalf("after synchronize: comments %+v", c2)
	}
	if cr := gh.CheckRuns(); len(cr) != 2 || cr[1].HeadSHA != sha2 || cr[1].Conclusion != "success" {
		t.Fatalf("after synchronize: check runs %+v", cr)
	}

	out, err = runAct("down", "closed", sha2)
	if err != nil {
		t.Fatalf("act, down: %v\n%s", err, out)
	}
	if ns, _ := h.Kubectl(ctx, "", "get", "ns", "af-env-shop-pr-21", "--ignore-not-found", "-o", "name"); strings.TrimSpace(ns) != "" {
		t.Errorf("namespace still there after down: %s", ns)
	}
	if c3 := gh.Comments(21); len(c3) != 1 || !strings.HasPrefix(c3[0].Body, report.Marker) || !strings.Contains(c3[0].Body, "Preview removed") {
		t.Fatalf("after down: comments %+v", c3)
	}
	for _, dep := range gh.Deployments() {
		if st := dep.Statuses[len(dep.Statuses)-1]; st.State != "inactive" {
			t.Errorf("deployment %d is %s after down", dep.ID, st.State)
		}
	}
	t.Logf("GitHub requests over the three runs: %d", len(gh.Calls()))
}

// TestActionUnderActNotContained: on the cluster without an enforcer the step fails with
// AF-RUN-043, the check fails naming the routes that got out, and the comment says so.
func TestActionUnderActNotContained(t *testing.T) {
	r := newActRepo(t, false)
	out, err := r.run("up", "opened", strings.Repeat("f", 40))
	if err == nil || !strings.Contains(out, "::error::AF-RUN-043") && !strings.Contains(out, "AF-RUN-043") {
		t.Fatalf("act: %v, want the step failed with AF-RUN-043\n%s", err, out)
	}
	cr := r.gh.CheckRuns()
	if len(cr) != 1 || cr[0].Conclusion != "failure" || !strings.Contains(cr[0].Title, "Not contained: escaped by") || !strings.Contains(cr[0].Title, "tcp-public") {
		t.Fatalf("check runs %+v", cr)
	}
	c := r.gh.Comments(21)
	if len(c) != 1 || !strings.Contains(c[0].Body, "Not contained") || !strings.Contains(c[0].Body, "| tcp-public | **escaped**") {
		t.Fatalf("comments %+v", c)
	}
	if !strings.Contains(out, "Summary - ## ⛔ Not contained") {
		t.Errorf("act shows no step summary saying the environment is not contained:\n%s", out)
	}
	if !strings.Contains(out, "contained=false") {
		t.Errorf("a later step did not read contained=false:\n%s", out)
	}
	t.Logf("check: %s", cr[0].Title)
}
