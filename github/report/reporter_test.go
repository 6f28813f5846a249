package report_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/antifailure/af/github/api"
	"github.com/antifailure/af/github/githubtest"
	"github.com/antifailure/af/github/report"
)

// More than 50 annotations go in batches of at most 50, the conclusion with the last; GitHub's
// description (maxItems 50) checks every request.
func TestAnnotationsInBatches(t *testing.T) {
	gh := githubtest.New(t, "tok")
	c, _, err := api.New(api.Options{APIURL: gh.URL, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := report.NewReporter(c, "acme/shop", githubtest.BotLogin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := r.StartCheck(ctx, strings.Repeat("a", 40), "")
	if err != nil {
		t.Fatal(err)
	}
	var notes []report.Annotation
	for i := 1; i <= 120; i++ {
		notes = append(notes, report.Annotation{Path: "af.yaml", Line: i, Level: "failure", Title: "x", Message: fmt.Sprint("problem ", i)})
	}
	f := &report.Facts{State: report.Failed, Environment: "shop-pr-1"}
	if err := r.FinishCheck(ctx, id, f, notes); err != nil {
		t.Fatal(err)
	}
	runs := gh.CheckRuns()
	if len(runs) != 1 || len(runs[0].Annotations) != 120 || runs[0].Writes != 4 || runs[0].Conclusion != "failure" {
		t.Fatalf("check run: %d annotations in %d writes, conclusion %q; want 120 in 1+3", len(runs[0].Annotations), runs[0].Writes, runs[0].Conclusion)
	}
	updates := 0
	for _, call := range gh.Calls() {
		if call.Method == "PATCH" {
			updates++
		}
	}
	if updates != 3 {
		t.Fatalf("%d updates, want 3 (50, 50, 20)", updates)
	}
}
