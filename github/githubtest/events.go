package githubtest

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var (
	eventsOnce sync.Once
	eventsErr  error
	examples   []struct {
		Name     string           `json:"name"`
		Examples []map[string]any `json:"examples"`
	}
	schemas *jsonschema.Compiler
	schemaC = map[string]*jsonschema.Schema{}
	schemaM sync.Mutex
)

const webhooksURL = "https://af.test/openapi-webhooks.json"

func loadEvents() error {
	eventsOnce.Do(func() {
		path, err := NPMFile(ExamplesPackage, "api.github.com/index.json")
		if err != nil {
			eventsErr = err
			return
		}
		b, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(b, &examples)
		}
		if err != nil {
			eventsErr = fmt.Errorf("webhook examples %s: %w", path, err)
			return
		}
		spec, err := NPMFile(WebhooksPackage, "generated/api.github.com.json")
		if err != nil {
			eventsErr = err
			return
		}
		f, err := os.Open(spec)
		if err != nil {
			eventsErr = err
			return
		}
		defer f.Close()
		doc, err := jsonschema.UnmarshalJSON(f)
		if err != nil {
			eventsErr = fmt.Errorf("webhook description %s: %w", spec, err)
			return
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		if err := c.AddResource(webhooksURL, doc); err != nil {
			eventsErr = err
			return
		}
		schemas = c
	})
	return eventsErr
}

func schemaFor(event, action string) (*jsonschema.Schema, error) {
	name := "webhook-" + strings.ReplaceAll(event, "_", "-")
	if action != "" {
		name += "-" + strings.ReplaceAll(action, "_", "-")
	}
	schemaM.Lock()
	defer schemaM.Unlock()
	if s, ok := schemaC[name]; ok {
		return s, nil
	}
	s, err := schemas.Compile(webhooksURL + "#/components/schemas/" + name)
	if err != nil {
		return nil, fmt.Errorf("webhook schema %s: %w", name, err)
	}
	schemaC[name] = s
	return s, nil
}

// mustSchema loads the examples and the webhook description, and returns the schema of event
// with action.
func mustSchema(t testing.TB, event, action string) *jsonschema.Schema {
	t.Helper()
	if err := loadEvents(); err != nil {
		t.Fatal(err)
	}
	s, err := schemaFor(event, action)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Event returns a copy of the first example payload of event (with action, if not empty)
// from @octokit/webhooks-examples that GitHub's webhook description accepts. Change it, then
// check it again with ValidateEvent.
func Event(t testing.TB, event, action string) map[string]any {
	t.Helper()
	s := mustSchema(t, event, action)
	for _, ex := range examplesOf(event, action) {
		b, _ := json.Marshal(ex)
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
		if err != nil || s.Validate(v) != nil {
			continue
		}
		var out map[string]any
		_ = json.Unmarshal(b, &out)
		return out
	}
	// Older examples of some actions no longer pass the current description: derive one from
	// the opened example, with the fields the action adds.
	if event == "pull_request" && action != "opened" {
		ev := Event(t, event, "opened")
		ev["action"] = action
		switch action {
		case "synchronize":
			ev["before"], ev["after"] = strings.Repeat("0", 40), strings.Repeat("1", 40)

		case "labeled", "unlabeled":
			ev["label"] = map[string]any{"id": 1, "node_id": "LA_1", "url": "https://api.github.com/labels/x", "name": "x", "color": "ededed", "default": false, "description": nil}
		}
		pr, _ := ev["pull_request"].(map[string]any)
		for _, side := range []string{"head", "base"} {
			if ref, ok := pr[side].(map[string]any); ok {
				if repo, ok := ref["repo"].(map[string]any); ok {
					if _, ok := repo["has_discussions"]; !ok {
						repo["has_discussions"] = false
					}
				}
			}
		}
		b, _ := json.Marshal(ev)
		if v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b))); err == nil && s.Validate(v) == nil {
			return ev
		} else if err == nil {
			t.Fatalf("the %s example turned into %s does not pass GitHub's webhook description: %v", event, action, s.Validate(v))
		}
	}
	// The installation examples predate the description: timestamps as numbers, fields it has
	// since made required. Bring the first one up to it.
	if event == "installation" || event == "installation_repositories" {
		for _, ex := range examplesOf(event, action) {
			b, _ := json.Marshal(ex)
			var ev map[string]any
			_ = json.Unmarshal(b, &ev)
			if in, ok := ev["installation"].(map[string]any); ok {
				in["app_slug"] = "af-previews"
				in["created_at"], in["updated_at"] = "2026-11-30T09:00:00Z", "2026-11-30T09:00:00Z"
				in["suspended_by"], in["suspended_at"] = nil, nil
			}
			if _, ok := ev["requester"]; !ok && event == "installation_repositories" {
				ev["requester"] = nil
			}
			b, _ = json.Marshal(ev)
			if v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b))); err == nil && s.Validate(v) == nil {
				return ev
			}
		}
	}
	t.Fatalf("no example %s %s in %s passes GitHub's webhook description", event, action, ExamplesPackage)
	return nil
}

// examplesOf returns the published examples of event with action (loaded by mustSchema).
func examplesOf(event, action string) []map[string]any {
	var out []map[string]any
	for _, e := range examples {
		if e.Name != event {
			continue
		}
		for _, ex := range e.Examples {
			if a, _ := ex["action"].(string); a == action {
				out = append(out, ex)
			}
		}
	}
	return out
}

// ValidateEvent fails the test when GitHub's webhook description refuses payload.
func ValidateEvent(t testing.TB, event, action string, payload map[string]any) []byte {
	t.Helper()
	s := mustSchema(t, event, action)
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(v); err != nil {
		t.Fatalf("GitHub's webhook description refuses the %s %s payload: %v", event, action, err)
	}
	return b
}

// PullRequestEvent returns a validated pull_request payload of action for repo (OWNER/NAME),
// pull request number n at head commit sha; fork says whether the head is another repository.
func PullRequestEvent(t testing.TB, action, repo string, n int, sha string, fork bool, labels ...string) []byte {
	t.Helper()
	ev := Event(t, "pull_request", action)
	owner, name, _ := strings.Cut(repo, "/")
	r, _ := ev["repository"].(map[string]any)
	r["full_name"], r["name"], r["default_branch"] = repo, name, "main"
	if o, ok := r["owner"].(map[string]any); ok {
		o["login"] = owner
	}
	ev["number"] = n
	pr, _ := ev["pull_request"].(map[string]any)
	pr["number"] = n
	head, _ := pr["head"].(map[string]any)
	head["sha"] = sha
	baseRef, _ := pr["base"].(map[string]any)
	baseRef["sha"] = strings.Repeat("b", 40)
	baseRef["ref"] = "main"
	baseRepo, _ := baseRef["repo"].(map[string]any)
	baseRepo["full_name"], baseRepo["name"] = repo, name
	hr, _ := head["repo"].(map[string]any)
	if hr != nil {
		if fork {
			hr["full_name"], hr["fork"] = "someone/"+name, true
		} else {
			hr["full_name"], hr["fork"] = repo, false
		}
	}
	var ls []any
	var template map[string]any
	if old, ok := pr["labels"].([]any); ok && len(old) > 0 {
		template, _ = old[0].(map[string]any)
	}
	for i, l := range labels {
		m := map[string]any{"id": 9000 + i, "node_id": fmt.Sprintf("LA_%d", i), "url": "https://api.github.com/labels/" + l, "name": l, "color": "ededed", "default": false, "description": nil}
		for k, v := range template {
			if _, ok := m[k]; !ok {
				m[k] = v
			}
		}
		ls = append(ls, m)
	}
	if ls == nil {
		ls = []any{}
	}
	pr["labels"] = ls
	return ValidateEvent(t, "pull_request", action, ev)
}

// WorkflowRunEvent returns a validated workflow_run completed payload for repo (OWNER/NAME):
// the run id of a pull_request run at head commit sha that ended with conclusion, from the fork
// headRepo (repo itself for a branch of the repository). GitHub lists no pull request in the
// payload for a fork's run; for a branch it lists number n.
func WorkflowRunEvent(t testing.TB, repo string, id int64, n int, sha, headRepo, conclusion string) []byte {
	t.Helper()
	ev := Event(t, "workflow_run", "completed")
	_, name, _ := strings.Cut(repo, "/")
	if r, ok := ev["repository"].(map[string]any); ok {
		r["full_name"], r["name"], r["default_branch"] = repo, name, "main"
	}
	wr, _ := ev["workflow_run"].(map[string]any)
	wr["id"], wr["event"], wr["conclusion"], wr["status"], wr["head_sha"] = id, "pull_request", conclusion, "completed", sha
	if r, ok := wr["repository"].(map[string]any); ok {
		r["full_name"], r["name"] = repo, name
	}
	if r, ok := wr["head_repository"].(map[string]any); ok {
		r["full_name"] = headRepo
	}
	prs := []any{}
	if headRepo == repo {
		prs = append(prs, map[string]any{"number": n, "id": 1, "url": "https://api.github.com/repos/" + repo + "/pulls/" + fmt.Sprint(n),
			"head": map[string]any{"ref": "feature", "sha": sha, "repo": map[string]any{"id": 1, "name": name, "url": "https://api.github.com/repos/" + repo}},
			"base": map[string]any{"ref": "main", "sha": strings.Repeat("b", 40), "repo": map[string]any{"id": 1, "name": name, "url": "https://api.github.com/repos/" + repo}}})
	}
	wr["pull_requests"] = prs
	return ValidateEvent(t, "workflow_run", "completed", ev)
}
