package build

import "fmt"

// CiliumVersion is the Cilium release built for the test cluster's third enforcer.
const CiliumVersion = "v1.20.2"

// ciliumModule is Cilium's one Go module: the agent and its CNI plugin are packages of it.
const ciliumModule = "github.com/cilium/cilium"

// ciliumGoMod is the throwaway module both Cilium programs build in. The release requires
// github.com/osrg/gobgp/v4 at a pseudo-version whose source the module proxy does not serve
// here (its go.mod, yes; its zip, 404); v4.7.0, the next release, is served and is what the
// build uses. The agent runs with BGP off, so nothing of gobgp runs. Cilium's own replace of
// sigs.k8s.io/controller-tools is for its code generators and does not apply to a dependency.
func ciliumGoMod() string {
	return fmt.Sprintf("module afbuild/cilium\n\ngo 1.26.0\n\nrequire %s %s\n\nreplace github.com/osrg/gobgp/v4 => github.com/osrg/gobgp/v4 v4.7.0\n",
		ciliumModule, CiliumVersion)
}

// CiliumAgent is cilium-agent (github.com/cilium/cilium/daemon), built as released. It runs
// without cilium-operator, whose source does not build here (sigs.k8s.io/mcs-api/controllers is
// not served): the agent allocates from the node's spec.podCIDR itself (--ipam=kubernetes),
// makes its own CiliumNode and CiliumIdentities, and the CRDs are applied by the cluster.
func CiliumAgent() Program { return ciliumProgram("cilium-agent", "/daemon") }

// CiliumCNI is Cilium's CNI plugin (github.com/cilium/cilium/plugins/cilium-cni), which asks
// the agent over its socket for each pod's address and endpoint.
func CiliumCNI() Program { return ciliumProgram("cilium-cni", "/plugins/cilium-cni") }

// ciliumProgram is the program name built from the package dir of Cilium's module.
func ciliumProgram(name, dir string) Program {
	pkg := ciliumModule + dir
	return Program{Name: name, Version: CiliumVersion, GoMod: ciliumGoMod(), Files: toolsFile(pkg), Package: pkg, LDFlags: "-s -w"}
}
