package manifest

import (
	"os"
	"testing"
)

func BenchmarkParseExample(b *testing.B) {
	data, err := os.ReadFile("testdata/valid/full.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if r := Parse(data); !r.Valid() {
			b.Fatal(r.Problems)
		}
	}
}
