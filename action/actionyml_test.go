package action_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/antifailure/af/action"
	"github.com/antifailure/af/version"
)

// action.yml declares exactly the inputs the action reads, the outputs it sets, and the image
// the release publishes.
func TestActionYAML(t *testing.T) {
	b, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Inputs  yaml.Node `yaml:"inputs"`
		Outputs map[string]struct {
			Description string `yaml:"description"`
		} `yaml:"outputs"`
		Runs struct {
			Using      string   `yaml:"using"`
			Image      string   `yaml:"image"`
			Entrypoint string   `yaml:"entrypoint"`
			Args       []string `yaml:"args"`
		} `yaml:"runs"`
		Branding map[string]string `yaml:"branding"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var inputs []string
	for i := 0; i < len(doc.Inputs.Content); i += 2 {
		inputs = append(inputs, doc.Inputs.Content[i].Value)
	}
	if !slices.Equal(inputs, action.InputNames) {
		t.Errorf("action.yml inputs %v, the action reads %v", inputs, action.InputNames)
	}
	var outputs []string
	for k := range doc.Outputs {
		outputs = append(outputs, k)
	}
	slices.Sort(outputs)
	if want := []string{"artifact", "contained", "environment", "namespace", "probe", "url", "urls"}; !slices.Equal(outputs, want) {
		t.Errorf("action.yml outputs %v, the action sets %v", outputs, want)
	}
	// The image: the release's tag until hack/release.sh runs, then that image by digest with
	// the release it is in a comment (TestReleasePinsTheImages).
	img, _ := strings.CutPrefix(doc.Runs.Image, "docker://")
	pinned := version.PinnedActionImage(img) && strings.Contains(string(b), doc.Runs.Image+" # "+version.Release+"\n")
	if doc.Runs.Using != "docker" || img != version.ActionImage && !pinned || doc.Runs.Entrypoint != "/af" || !slices.Equal(doc.Runs.Args, []string{"action"}) {
		t.Errorf("runs %+v, want the prebuilt docker://%s (or the release's pin of it by digest) running /af action", doc.Runs, version.ActionImage)
	}
	if doc.Branding["icon"] == "" || doc.Branding["color"] == "" {
		t.Errorf("no branding")
	}
	if !strings.Contains(string(b), "default: ${{ github.token }}") {
		t.Errorf("the token input does not default to github.token (containers get no token otherwise)")
	}
	rel, err := os.ReadFile("../.github/workflows/release.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rel), "hack/release.sh") {
		t.Errorf("release.yml does not run hack/release.sh (which checks the version against version.Release and pins the action's image)")
	}
}
