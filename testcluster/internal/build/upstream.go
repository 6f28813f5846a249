package build

import "fmt"

// Pinned versions of the upstream programs built from the module proxy.
const (
	KubeRouterVersion = "v2.1.0"
	CoreDNSVersion    = "v1.15.0"
	TraefikVersion    = "v3.6.12"
)

// toolsFile makes `go mod tidy` keep the upstream module: it imports the
// program's main package in a file that is never built (the tools.go pattern).
func toolsFile(pkg string) map[string]string {
	return map[string]string{"tools.go": fmt.Sprintf("//go:build tools\n\npackage tools\n\nimport _ %q\n", pkg)}
}

// KubeRouter is kube-router, built unmodified; the cluster runs only its
// NetworkPolicy controller (--run-firewall).
func KubeRouter() Program {
	const pkg = "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
	return Program{
		Name:    "kube-router",
		Version: KubeRouterVersion,
		GoMod:   fmt.Sprintf("module afbuild/kube-router\n\ngo 1.22\n\nrequire github.com/cloudnativelabs/kube-router/v2 %s\n", KubeRouterVersion),
		Files:   toolsFile(pkg),
		Package: pkg,
		LDFlags: "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=" + KubeRouterVersion,
	}
}

// CoreDNS is the cluster resolver, built unmodified.
func CoreDNS() Program {
	const pkg = "github.com/coredns/coredns"
	return Program{
		Name:    "coredns",
		Version: CoreDNSVersion,
		GoMod:   fmt.Sprintf("module afbuild/coredns\n\ngo 1.26.0\n\nrequire github.com/coredns/coredns %s\n", CoreDNSVersion),
		Files:   toolsFile(pkg),
		Package: pkg,
		LDFlags: "-s -w",
	}
}

// Traefik is the ingress controller, built unmodified. Its own go.mod's
// replace and exclude directives are repeated here, since a dependent module
// does not inherit them.
func Traefik() Program {
	const pkg = "github.com/traefik/traefik/v3/cmd/traefik"
	gomod := fmt.Sprintf(`module afbuild/traefik

go 1.25.0

require github.com/traefik/traefik/v3 %s

replace (
	github.com/abbot/go-http-auth => github.com/containous/go-http-auth v0.4.1-0.20200324110947-a37a7636d23e
	github.com/gorilla/mux => github.com/containous/mux v0.0.0-20250523120546-41b6ec3aed59
	github.com/mailgun/minheap => github.com/containous/minheap v0.0.0-20190809180810-6e71eb837595
)

exclude github.com/tencentcloud/tencentcloud-sdk-go v3.0.83+incompatible
`, TraefikVersion)
	return Program{
		Name:    "traefik",
		Version: TraefikVersion,
		GoMod:   gomod,
		Files:   toolsFile(pkg),
		Package: pkg,
		LDFlags: "-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=" + TraefikVersion,
	}
}
