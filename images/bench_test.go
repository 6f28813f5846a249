package images

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// BenchmarkPublishCold pushes the docker archive AF_BENCH_ARCHIVE to the registry prefix
// AF_BENCH_REGISTRY (plain HTTP), each time under a new repository, so every layer is
// uploaded: the figure to put next to `crane push` of the same archive (make bench-publish).
func BenchmarkPublishCold(b *testing.B) {
	archive, registry := os.Getenv("AF_BENCH_ARCHIVE"), os.Getenv("AF_BENCH_REGISTRY")
	if archive == "" || registry == "" {
		b.Skip("set AF_BENCH_ARCHIVE and AF_BENCH_REGISTRY (make bench-publish does)")
	}
	img, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		b.Fatal(err)
	}
	reg, err := NewRegistry(registry, true, nil)
	if err != nil {
		b.Fatal(err)
	}
	var bytes int64
	for i := 0; b.Loop(); i++ {
		p, err := reg.Publish(context.Background(), img, fmt.Sprintf("bench-%d-%d", os.Getpid(), i))
		if err != nil {
			b.Fatal(err)
		}
		bytes = p.Uploaded
	}
	b.ReportMetric(float64(bytes), "bytes/publish")
}
