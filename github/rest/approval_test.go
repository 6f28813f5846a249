package rest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/antifailure/af/github/githubtest"
	"github.com/antifailure/af/github/rest"
)

const approvedSHA = "3f2c9d1e5a7b9c0d1e2f3a4b5c6d7e8f9a0b1c2d"

// Only the comment's whole text, the full commit id, never edited, approves a commit.
func TestApproves(t *testing.T) {
	cmd := "/af approve " + approvedSHA
	cases := []struct {
		name   string
		body   string
		edited bool
		want   bool
	}{
		{"the full id", cmd, false, true},
		{"white space around it", "\n  " + cmd + "  \r\n", false, true},
		{"upper case digits", "/af approve " + strings.ToUpper(approvedSHA), false, true},
		{"a 7-digit prefix (forgeable: 2^28 tries)", "/af approve " + approvedSHA[:7], false, false},
		{"a 39-digit prefix", "/af approve " + approvedSHA[:39], false, false},
		{"a longer id", cmd + "0", false, false},
		{"another commit", "/af approve " + strings.Repeat("a", 40), false, false},
		{"on a line of a longer comment", "LGTM\n" + cmd, false, false},
		{"quoted", "> " + cmd, false, false},
		{"quoted in a reply", "> " + cmd + "\n\nwhy was this approved?", false, false},
		{"fenced", "```\n" + cmd + "\n```", false, false},
		{"indented code", "    " + cmd + "\nsee above", false, false},
		{"inline code", "`" + cmd + "`", false, false},
		{"an HTML comment", "<!-- " + cmd + " -->", false, false},
		{"a details block", "<details><summary>x</summary>\n\n" + cmd + "\n\n</details>", false, false},
		{"edited after it was written", cmd, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
			updated := at
			if c.edited {
				updated = at.Add(time.Minute)
			}
			ic := &github.IssueComment{Body: github.String(c.body), CreatedAt: &github.Timestamp{Time: at}, UpdatedAt: &github.Timestamp{Time: updated}}
			if got := rest.Approves(ic, approvedSHA); got != c.want {
				t.Fatalf("Approves(%q, edited %v) = %v, want %v", c.body, c.edited, got, c.want)
			}
		})
	}
}

// Against the GitHub stand-in: an approval by a writer counts; one edited into an approval
// does not; the newest of several is the one returned.
func TestCommitApproval(t *testing.T) {
	const tok = "ghs_approvaltoken0123456789"
	gh := githubtest.New(t, tok)
	gh.SetPermission("maint", "write")
	gh.SetPermission("reader", "read")
	rep := &rest.Repository{Client: gh.Client(t, tok, nil), Owner: "acme", Repo: "shop"}
	ctx := context.Background()
	cmd := "/af approve " + approvedSHA
	gh.AddComment(7, "reader", cmd)
	old := gh.AddComment(7, "maint", "looks fine so far")
	if _, ok, err := rep.CommitApproval(ctx, 7, approvedSHA); err != nil || ok {
		t.Fatalf("approved by a reader or by other text: %v %v", ok, err)
	}
	gh.EditComment(old, cmd)
	if a, ok, err := rep.CommitApproval(ctx, 7, approvedSHA); err != nil || ok {
		t.Fatalf("an old comment edited into an approval counted: %+v %v", a, err)
	}
	first := gh.AddComment(7, "maint", cmd)
	second := gh.AddComment(7, "MAINT", cmd)
	a, ok, err := rep.CommitApproval(ctx, 7, approvedSHA)
	if err != nil || !ok || a.CommentID != second || a.CommentID == first {
		t.Fatalf("approval %+v ok %v err %v, want comment %d (the newest)", a, ok, err, second)
	}
}
