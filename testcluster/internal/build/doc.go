// Package build produces the binaries and image archives the test cluster runs.
//
// Upstream Go programs (Kubernetes, kube-router, CoreDNS, Traefik) are built
// through the Go module proxy in throwaway modules generated under the cache
// directory, never in af's own go.mod. Each result is cached by name and
// version, so a second run only checks that the binary is there. Builds are
// serialised by a file lock: the machine has two cores and a Kubernetes build
// alone needs both.
package build
