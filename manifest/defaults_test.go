package manifest

import (
	"reflect"
	"testing"
)

// Defaulted gives what a manifest without the block means: the same values Parse fills in.
func TestDefaultedIsWhatParseFills(t *testing.T) {
	res := Parse([]byte("name: shop\nruntime:\n  provider: kubernetes\nservices:\n  web:\n    image: registry.test/web:1\n    port: 8080\n"))
	if !res.Valid() {
		t.Fatalf("problems: %v", res.Problems)
	}
	gh := Defaulted[GitHub]()
	if gh.Label != "af-preview" || gh.ForkPolicy != "label" || !reflect.DeepEqual(gh, res.Manifest.GitHub) {
		t.Fatalf("Defaulted[GitHub]() = %+v; Parse filled %+v", gh, res.Manifest.GitHub)
	}
}
