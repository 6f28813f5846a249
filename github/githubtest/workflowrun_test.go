package githubtest_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/antifailure/af/github/githubtest"
)

func TestWorkflowRunEventValidates(t *testing.T) {
	b := githubtest.WorkflowRunEvent(t, "acme/shop", 42, 7, strings.Repeat("1", 40), "someone/shop", "success")
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	wr := m["workflow_run"].(map[string]any)
	if wr["head_sha"] != strings.Repeat("1", 40) || len(wr["pull_requests"].([]any)) != 0 {
		t.Fatalf("%v", wr)
	}
	b = githubtest.WorkflowRunEvent(t, "acme/shop", 42, 7, strings.Repeat("1", 40), "acme/shop", "success")
	_ = json.Unmarshal(b, &m)
	if n := len(m["workflow_run"].(map[string]any)["pull_requests"].([]any)); n != 1 {
		t.Fatalf("pull_requests %d", n)
	}
}
