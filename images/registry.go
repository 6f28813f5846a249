package images

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/antifailure/af/failure"
)

// Registry pushes to a registry the cluster pulls from and deploys by digest, never by a
// moving tag. Layers the registry already has are not uploaded again. Credentials come from
// the docker config and the platform keychains (authn.DefaultKeychain), or Auth when set.
type Registry struct {
	Prefix   string // repository prefix, e.g. ghcr.io/acme/previews
	Insecure bool
	Auth     authn.Authenticator
	Progress func(format string, args ...any)
}

// NewRegistry checks the prefix and returns the publisher.
func NewRegistry(prefix string, insecure bool, p func(string, ...any)) (*Registry, error) {
	prefix = strings.TrimSuffix(prefix, "/")
	if _, err := name.NewRepository(prefix+"/x", opts(insecure)...); err != nil {
		return nil, failure.Newf(failure.ManifestInvalid, "runtime.registry %q is not a repository prefix: %v", prefix, err)
	}
	return &Registry{Prefix: prefix, Insecure: insecure, Progress: p}, nil
}

func opts(insecure bool) []name.Option {
	if insecure {
		return []name.Option{name.Insecure}
	}
	return nil
}

// Target names the registry.
func (r *Registry) Target() string { return "registry " + r.Prefix }

// Publish pushes img as <prefix>/<name>:<digest-derived tag> and returns <prefix>/<name>@digest.
func (r *Registry) Publish(ctx context.Context, img v1.Image, repo string) (Published, error) {
	digest, err := img.Digest()
	if err != nil {
		return Published{}, fmt.Errorf("image digest: %w", err)
	}
	// The tag only keeps the image from being collected as untagged; pods use the digest.
	tag, err := name.NewTag(r.Prefix+"/"+repo+":af-"+digest.Hex[:16], opts(r.Insecure)...)
	if err != nil {
		return Published{}, failure.Newf(failure.ManifestInvalid, "image name %s/%s: %v", r.Prefix, repo, err)
	}
	counter := &countingTransport{base: remote.DefaultTransport}
	o := []remote.Option{remote.WithContext(ctx), remote.WithTransport(counter)}
	if r.Auth != nil {
		o = append(o, remote.WithAuth(r.Auth))
	} else {
		o = append(o, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	}
	updates := make(chan v1.Update, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var last int64
		for u := range updates {
			if u.Total > 0 && (u.Complete-last > u.Total/4 || u.Complete == u.Total) {
				last = u.Complete
				progress(r.Progress, "  %s: %d of %d bytes", repo, u.Complete, u.Total)
			}
		}
	}()
	o = append(o, remote.WithProgress(updates))
	err = remote.Write(tag, img, o...)
	<-done
	if err != nil {
		return Published{}, failure.New(failure.ImagePublish, fmt.Sprintf("pushing %s: %v", tag, err), err)
	}
	ref := tag.Context().Digest(digest.String()).String()
	return Published{Ref: ref, Uploaded: counter.sent.Load(), LayerBytes: counter.blobs.Load()}, nil
}

// countingTransport counts the request body bytes sent (what an upload cost), and of those
// the bytes sent to blob upload endpoints (layers and config).
type countingTransport struct {
	base  http.RoundTripper
	sent  atomic.Int64
	blobs atomic.Int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		req = req.Clone(req.Context())
		var blob *atomic.Int64
		if strings.Contains(req.URL.Path, "/blobs/uploads/") {
			blob = &c.blobs
		}
		req.Body = &countingBody{ReadCloser: req.Body, n: &c.sent, blob: blob}
	}
	return c.base.RoundTrip(req)
}

type countingBody struct {
	io.ReadCloser
	n, blob *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	if b.blob != nil {
		b.blob.Add(int64(n))
	}
	return n, err
}
