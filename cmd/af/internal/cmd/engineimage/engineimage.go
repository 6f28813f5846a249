// Package engineimage implements the hidden `af engine-image`: af packages its own running
// binary as the engine image, without any container daemon.
package engineimage

import (
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/spf13/cobra"

	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/images/engine"
	"github.com/antifailure/af/version"
)

// NewCmdEngineImage returns `af engine-image`.
func NewCmdEngineImage(f *factory.Factory) *cobra.Command {
	var tarPath, ociDir, binary, push string
	var forAction bool
	cmd := &cobra.Command{
		Use:    "engine-image {--tar FILE | --oci DIR | --push REF}...",
		Short:  "Write af's engine image (this binary, nothing else) as a docker archive and an OCI layout",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tarPath == "" && ociDir == "" && push == "" {
				return failure.Newf(failure.UsageInvalid, "give --tar FILE, --oci DIR, --push REF or several")
			}
			var pushTo name.Tag
			if push != "" {
				var err error
				if pushTo, err = name.NewTag(push, name.StrictValidation); err != nil {
					return failure.Newf(failure.UsageInvalid, "--push %q: a repository and tag such as ghcr.io/antifailure/af:v0.2.0 (%v)", push, err)
				}
			}
			if binary == "" {
				exe, err := os.Executable()
				if err != nil {
					return failure.New(failure.Internal, "finding this binary", err)
				}
				binary = exe
			}
			b, err := os.ReadFile(binary)
			if err != nil {
				return failure.New(failure.ManifestUnreadable, "reading the af binary", err).WithHint("Name a readable static af binary with --binary.")
			}
			img, err := engine.Image(b, version.EngineDigest)
			ref := version.LocalEngineImage
			if forAction {
				img, err = engine.ActionImage(b, version.EngineDigest)
				ref = version.ActionImage
			}
			if err != nil {
				return failure.New(failure.Internal, "writing the image", err)
			}
			if tarPath != "" {
				if err := engine.WriteTarball(tarPath, ref, img); err != nil {
					return failure.New(failure.Internal, "writing "+tarPath, err)
				}
			}
			if ociDir != "" {
				if err := engine.WriteLayout(ociDir, ref, img); err != nil {
					return failure.New(failure.Internal, "writing "+ociDir, err)
				}
			}
			digest, err := img.Digest()
			if err != nil {
				return failure.New(failure.Internal, "digest", err)
			}
			if push != "" {
				// The release: pushed by tag, named by digest (what action.yml and the App's
				// Deployment pin). Credentials from the docker config (crane auth login, docker
				// login) or the platform keychains.
				fmt.Fprintf(f.IO.ErrOut, "af: pushing %s\n", pushTo)
				if err := remote.Write(pushTo, img, remote.WithContext(cmd.Context()), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
					return failure.New(failure.ImagePublish, fmt.Sprintf("pushing %s: %v", pushTo, err), err)
				}
				pinned := pushTo.Context().Digest(digest.String()).String()
				if f.IO.JSON() {
					return f.WriteJSON(map[string]any{"image": ref, "digest": digest.String(), "pushed": pinned})
				}
				fmt.Fprintln(f.IO.Out, pinned)
				return nil
			}
			size, _ := img.Manifest()
			var bytes int64
			if size != nil {
				for _, l := range size.Layers {
					bytes += l.Size
				}
			}
			if f.IO.JSON() {
				return f.WriteJSON(map[string]any{"image": ref, "digest": digest.String(), "layer_bytes": bytes, "tar": tarPath, "oci": ociDir})
			}
			fmt.Fprintf(f.IO.Out, "%s %s (%d bytes compressed)\n", ref, digest, bytes)
			return nil
		},
	}
	cmd.Flags().StringVar(&tarPath, "tar", "", "write a docker-loadable archive here")
	cmd.Flags().StringVar(&ociDir, "oci", "", "write an OCI image layout into this directory")
	cmd.Flags().BoolVar(&forAction, "action", false, "write the action's image ("+version.ActionImage+": af, a /tmp, run as root) instead")
	cmd.Flags().StringVar(&push, "push", "", "push the image to this REPOSITORY:TAG and print it by digest (REPOSITORY@sha256:...), the reference a release pins")
	cmd.Flags().StringVar(&binary, "binary", "", "the static af binary to package (default: this one)")
	return cmd
}
