package action_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/antifailure/af/version"
)

// standins are the actions from elsewhere the documented workflows use, stood in for by local
// composite actions that act runs in their place (--local-repository), so the workflows run
// with their uses: lines as the doc writes them; github.com cannot be reached here.
// upload-artifact and download-artifact keep an artifact under $AF_ARTIFACTS/<run id>/<name>;
// checkout checks out for real, from the repositories under $AF_GIT/<owner>/<name> (act itself
// only copies its working directory for a checkout of the event's own commit), and says what
// it was asked for.
var standins = map[string]string{
	"actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683": `name: checkout (stand-in)
inputs:
  ref: {required: false, default: ""}
  repository: {required: false, default: ""}
  persist-credentials: {required: false, default: "true"}
runs:
  using: composite
  steps:
    - shell: bash
      env:
        REF: ${{ inputs.ref }}
        REPO: ${{ inputs.repository || github.repository }}
        PERSIST: ${{ inputs.persist-credentials }}
      run: |
        set -euo pipefail
        echo "checkout stand-in: $REPO at ${REF:-$GITHUB_SHA}, persist-credentials=$PERSIST"
        git -C "$GITHUB_WORKSPACE" init -q
        git -C "$GITHUB_WORKSPACE" fetch -q "$AF_GIT/$REPO" '+refs/heads/*:refs/remotes/origin/*'
        git -C "$GITHUB_WORKSPACE" -c advice.detachedHead=false checkout -q "${REF:-$GITHUB_SHA}"
`,
	"docker/setup-buildx-action@e468171a9de216ec08956ac3ada2f0791b6bd435": `name: setup-buildx (stand-in)
runs:
  using: composite
  steps:
    - shell: bash
      run: echo "setup-buildx stand-in"
`,
	"docker/login-action@74a5d142397b4f367a81961eba4e8cd7edddf772": `name: login (stand-in)
inputs:
  registry: {required: false}
  username: {required: false}
  password: {required: false}
runs:
  using: composite
  steps:
    - shell: bash
      run: |
        echo "login stand-in: registry=${{ inputs.registry }} username=${{ inputs.username }}"
`,
	// build-push builds with the runner's daemon and pushes to the test cluster's registry.
	"docker/build-push-action@263435318d21b8e681c14492fe198d362a7d2c83": `name: build-push (stand-in)
inputs:
  context: {required: true}
  file: {required: false, default: ""}
  push: {required: false, default: "false"}
  tags: {required: true}
outputs:
  digest: {value: "${{ steps.build.outputs.digest }}"}
runs:
  using: composite
  steps:
    - id: build
      shell: bash
      env:
        CONTEXT: ${{ inputs.context }}
        FILE: ${{ inputs.file }}
        PUSH: ${{ inputs.push }}
        TAG: ${{ inputs.tags }}
      run: |
        set -euo pipefail
        echo "build-push stand-in: ${FILE:-$CONTEXT/Dockerfile} in $CONTEXT as $TAG, push=$PUSH"
        docker build -q -t "$TAG" -f "${FILE:-$CONTEXT/Dockerfile}" "$CONTEXT"
        test "$PUSH" = true
        docker push -q "$TAG"
        ref=$(docker image inspect --format '{{index .RepoDigests 0}}' "$TAG")
        echo "digest=${ref#*@}" >> "$GITHUB_OUTPUT"
`,
	"actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02": `name: upload-artifact (stand-in)
inputs:
  name: {required: true}
  path: {required: true}
  if-no-files-found: {required: false}
  retention-days: {required: false}
runs:
  using: composite
  steps:
    - shell: bash
      run: |
        set -euo pipefail
        test -e "${{ inputs.path }}"
        dest="$AF_ARTIFACTS/${{ github.run_id }}/${{ inputs.name }}"
        mkdir -p "$dest"
        cp -r "${{ inputs.path }}/." "$dest/"
`,
	"actions/download-artifact@d3f86a106a0bac45b974a628896c90dbdf5c8093": `name: download-artifact (stand-in)
inputs:
  name: {required: true}
  path: {required: true}
  run-id: {required: true}
  github-token: {required: false}
runs:
  using: composite
  steps:
    - shell: bash
      run: |
        set -euo pipefail
        mkdir -p "${{ inputs.path }}"
        cp -r "$AF_ARTIFACTS/${{ inputs.run-id }}/${{ inputs.name }}/." "${{ inputs.path }}/"
`,
}

// localRepos writes the stand-ins, and this repository's action.yml as the release the doc
// names, under dir, and returns them as act's local repositories.
func localRepos(t *testing.T, dir string) map[string]string {
	t.Helper()
	ayml, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	// A release pins the image by digest (hack/release.sh): the runner has this tree's build
	// under the release's tag instead, and nothing can be pulled here.
	ayml = regexp.MustCompile(`docker://ghcr.io/antifailure/af@sha256:[0-9a-f]{64}`).ReplaceAll(ayml, []byte("docker://"+version.ActionImage))
	files := map[string]string{"antifailure/af@" + versionTag(t): string(ayml)}
	for k, v := range standins {
		files[k] = v
	}
	repos := map[string]string{}
	for ref, content := range files {
		d := filepath.Join(dir, strings.NewReplacer("/", "_", "@", "_").Replace(ref))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "action.yml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		repos[ref] = d
	}
	return repos
}

// docWorkflow returns the workflow named name from docs/github.md with only its image
// references pointed at the cluster's registry (ghcr.io cannot be reached here); every action
// it uses must be one repos stands in for.
func docWorkflow(t *testing.T, name string, repos map[string]string) string {
	t.Helper()
	b, err := os.ReadFile("../docs/github.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		if !strings.HasPrefix(block[1], "name: "+name+"\n") {
			continue
		}
		w := strings.ReplaceAll(block[1], "ghcr.io/${{ github.repository }}", "${{ env.REGISTRY }}")
		for _, m := range regexp.MustCompile(`(?m)^\s*-?\s*uses:\s*(\S+)`).FindAllStringSubmatch(w, -1) {
			if repos[m[1]] == "" {
				t.Fatalf("the documented %s uses %s, which the test does not stand in for", name, m[1])
			}
		}
		return w
	}
	t.Fatalf("docs/github.md has no workflow %s", name)
	return ""
}

func versionTag(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`image: docker://ghcr.io/antifailure/af(?::(v\S+)|@sha256:[0-9a-f]{64} # (v\S+))`).FindSubmatch(b)
	if m == nil {
		t.Fatal("action.yml names no release")
	}
	return string(m[1]) + string(m[2])
}

// git runs git in dir and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t.test"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}
