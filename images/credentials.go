package images

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/antifailure/af/failure"
)

// LoopbackRegistry reports whether a registry prefix names this machine: such a registry is
// spoken to over plain HTTP.
func LoopbackRegistry(prefix string) bool {
	host, _, _ := strings.Cut(prefix, "/")
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	ip := net.ParseIP(h)
	return h == "localhost" || ip != nil && ip.IsLoopback()
}

// nameOptions are the reference options for a registry prefix (plain HTTP on loopback).
func nameOptions(prefix string) []name.Option {
	if LoopbackRegistry(prefix) {
		return []name.Option{name.Insecure}
	}
	return nil
}

// remoteAuth is the credential choice: auth when given, else the docker config and the
// platform keychains.
func remoteAuth(auth authn.Authenticator) remote.Option {
	if auth != nil {
		return remote.WithAuth(auth)
	}
	return remote.WithAuthFromKeychain(authn.DefaultKeychain)
}

// Pin returns ref by digest when it is a tag under the registry prefix (only that registry is
// asked: it is the one af is configured to talk to). ok is false when ref is left as written:
// another registry, already a digest, or not a reference; err says why a digest could not be
// read.
func Pin(ctx context.Context, prefix string, auth authn.Authenticator, ref string) (pinned string, ok bool, err error) {
	if prefix == "" {
		return ref, false, nil
	}
	host, _, _ := strings.Cut(prefix, "/")
	r, perr := name.ParseReference(ref, nameOptions(prefix)...)
	if perr != nil || r.Context().RegistryStr() != host {
		return ref, false, nil
	}
	if _, isDigest := r.(name.Digest); isDigest {
		return ref, false, nil
	}
	desc, err := remote.Head(r, remote.WithContext(ctx), remoteAuth(auth))
	if err != nil {
		return ref, false, err
	}
	return r.Context().Digest(desc.Digest.String()).String(), true, nil
}

// PullSecret returns the docker config JSON (.dockerconfigjson) of the credentials af pushes
// to the registry prefix with (auth, else the docker config and platform keychains), for an
// image pull secret, and the registry's host. data is nil when the credentials are anonymous:
// the registry is public to the cluster, or needs no secret.
func PullSecret(prefix string, auth authn.Authenticator) (host string, data []byte, err error) {
	host, _, _ = strings.Cut(prefix, "/")
	reg, err := name.NewRegistry(host, nameOptions(prefix)...)
	if err != nil {
		return host, nil, failure.Newf(failure.ManifestInvalid, "runtime.registry %q: %v", prefix, err)
	}
	if auth == nil {
		if auth, err = authn.DefaultKeychain.Resolve(reg); err != nil {
			return host, nil, failure.New(failure.ImagePublish, fmt.Sprintf("reading the credentials for %s: %v", host, err), err)
		}
	}
	cfg, err := auth.Authorization()
	if err != nil {
		return host, nil, failure.New(failure.ImagePublish, fmt.Sprintf("reading the credentials for %s: %v", host, err), err)
	}
	if *cfg == (authn.AuthConfig{}) {
		return host, nil, nil
	}
	entry := map[string]string{}
	if cfg.Username != "" || cfg.Password != "" {
		entry["username"], entry["password"] = cfg.Username, cfg.Password
		entry["auth"] = base64.StdEncoding.EncodeToString([]byte(cfg.Username + ":" + cfg.Password))
	} else if cfg.Auth != "" {
		entry["auth"] = cfg.Auth
	}
	if cfg.IdentityToken != "" {
		entry["identitytoken"] = cfg.IdentityToken
	}
	if cfg.RegistryToken != "" {
		entry["registrytoken"] = cfg.RegistryToken
	}
	data, err = json.Marshal(map[string]any{"auths": map[string]any{host: entry}})
	if err != nil {
		return host, nil, fmt.Errorf("encoding the pull secret: %w", err)
	}
	return host, data, nil
}
