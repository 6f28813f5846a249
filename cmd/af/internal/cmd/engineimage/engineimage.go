// Package engineimage implements the hidden `af engine-image`: af packages its own running
// binary as the engine image, without any container daemon.
package engineimage

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/images/engine"
	"github.com/antifailure/af/version"
)

// NewCmdEngineImage returns `af engine-image`.
func NewCmdEngineImage(f *factory.Factory) *cobra.Command {
	var tarPath, ociDir, binary string
	var forAction bool
	cmd := &cobra.Command{
		Use:    "engine-image --tar FILE [--oci DIR]",
		Short:  "Write af's engine image (this binary, nothing else) as a docker archive and an OCI layout",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if tarPath == "" && ociDir == "" {
				return failure.Newf(failure.UsageInvalid, "give --tar FILE, --oci DIR or both")
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
	cmd.Flags().StringVar(&binary, "binary", "", "the static af binary to package (default: this one)")
	return cmd
}
