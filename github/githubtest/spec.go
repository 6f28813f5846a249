// Package githubtest is a stand-in for GitHub's REST API, for tests of the action and the App.
//
// Every request it gets is validated against GitHub's own published description of the API
// (npm @octokit/openapi, loaded with kin-openapi) and refused, failing the test, when the
// description refuses it; checks the description cannot express (a non-empty head_sha, at
// most 50 annotations per request, body fields the operation does not have, absolute URLs)
// are added. It keeps the state a test asks about (comments, check runs, deployments and
// their statuses, labels, files at a ref) and answers from the description's own examples,
// overlaid with that state; its answers are validated against the description too. Event
// payloads come from npm @octokit/webhooks-examples, validated against
// @octokit/openapi-webhooks.
//
// GitHub's description is 13 MB; the stand-in loads only the operations af calls (Paths) and
// the components they reference, cut out once and cached under $HOME/.cache/af/openapi.
package githubtest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// The npm packages the stand-in reads, pinned.
const (
	OpenAPIPackage  = "@octokit/openapi@23.0.2"
	WebhooksPackage = "@octokit/openapi-webhooks@12.1.0"
	ExamplesPackage = "@octokit/webhooks-examples@7.6.1"
	// MethodsPackage is GitHub's reference implementation of webhook signing.
	MethodsPackage = "@octokit/webhooks-methods@6.0.0"
)

// Paths are the REST operations af calls: the description is cut down to these.
var Paths = []string{
	"/repos/{owner}/{repo}/issues/{issue_number}/comments",
	"/repos/{owner}/{repo}/issues/comments/{comment_id}",
	"/repos/{owner}/{repo}/issues/{issue_number}/labels",
	"/repos/{owner}/{repo}/issues/{issue_number}/labels/{name}",
	"/repos/{owner}/{repo}/check-runs",
	"/repos/{owner}/{repo}/check-runs/{check_run_id}",
	"/repos/{owner}/{repo}/deployments",
	"/repos/{owner}/{repo}/deployments/{deployment_id}/statuses",
	"/repos/{owner}/{repo}/contents/{path}",
	"/repos/{owner}/{repo}/pulls/{pull_number}",
	"/repos/{owner}/{repo}/pulls",
	"/app/installations/{installation_id}/access_tokens",
	"/app/installations",
	"/app",
	"/repos/{owner}/{repo}/installation",
	"/repos/{owner}/{repo}/collaborators/{username}/permission",
}

// Cache is where the npm packages and the cut-down description are kept: $HOME/.cache/af, as
// for every heavy thing the tests fetch or build.
func Cache() string {
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "af")
}

var npmOnce sync.Mutex

// NPMFile returns the path of file inside the npm package pkg (name@version), installing the
// pinned packages into the cache first when they are missing.
func NPMFile(pkg, file string) (string, error) {
	name := pkg[:strings.LastIndex(pkg, "@")]
	dir := filepath.Join(Cache(), "npm")
	path := filepath.Join(dir, "node_modules", name, file)
	npmOnce.Lock()
	defer npmOnce.Unlock()
	if ok, err := installed(dir, name, pkg); err != nil {
		return "", err
	} else if ok {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--prefix", dir, OpenAPIPackage, WebhooksPackage, ExamplesPackage, MethodsPackage)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install %s into %s: %w\n%s", pkg, dir, err, out)
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("npm installed %s but %s is not there: %w", pkg, file, err)
	}
	return path, nil
}

func installed(dir, name, pkg string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", name, "package.json"))
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var p struct{ Version string }
	if err := json.Unmarshal(b, &p); err != nil {
		return false, nil
	}
	return name+"@"+p.Version == pkg, nil
}

// subsetPath returns the cut-down description holding only paths, writing it on first use.
func subsetPath(paths []string) (string, error) {
	sorted := append([]string(nil), paths...)
	sort.Strings(sorted)
	sum := sha256.Sum256([]byte(OpenAPIPackage + "\n" + strings.Join(sorted, "\n")))
	out := filepath.Join(Cache(), "openapi", "api.github.com-"+hex.EncodeToString(sum[:6])+".json")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	full, err := NPMFile(OpenAPIPackage, "generated/api.github.com.json")
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(full)
	if err != nil {
		return "", err
	}
	sub, err := cut(b, sorted)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, sub, 0o644); err != nil {
		return "", err
	}
	return out, os.Rename(tmp, out)
}

// cut keeps the named paths of a description and every component they reference, directly or
// not.
func cut(full []byte, paths []string) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(full, &doc); err != nil {
		return nil, fmt.Errorf("GitHub's description: %w", err)
	}
	all, _ := doc["paths"].(map[string]any)
	comps, _ := doc["components"].(map[string]any)
	keep := map[string]any{}
	for _, p := range paths {
		item, ok := all[p]
		if !ok {
			return nil, fmt.Errorf("GitHub's description (%s) has no path %s", OpenAPIPackage, p)
		}
		keep[p] = item
	}
	used := map[string]map[string]any{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref, ok := x["$ref"].(string); ok && strings.HasPrefix(ref, "#/components/") {
				parts := strings.SplitN(strings.TrimPrefix(ref, "#/components/"), "/", 2)
				if len(parts) == 2 {
					kind, name := parts[0], strings.ReplaceAll(strings.ReplaceAll(parts[1], "~1", "/"), "~0", "~")
					if used[kind] == nil {
						used[kind] = map[string]any{}
					}
					if _, seen := used[kind][name]; !seen {
						src, _ := comps[kind].(map[string]any)
						used[kind][name] = src[name]
						walk(src[name])
					}
				}
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(keep)
	out := map[string]any{
		"openapi":    doc["openapi"],
		"info":       doc["info"],
		"paths":      keep,
		"components": used,
	}
	return json.Marshal(out)
}
