package build

import (
	"fmt"
	"strings"
)

// KubernetesVersion is the pinned Kubernetes release.
const KubernetesVersion = "v1.35.4"

// KubernetesCommands are the names the combined binary answers to.
var kubernetesCommands = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl"}

// KubernetesCommands returns the names the combined Kubernetes binary dispatches on.
func KubernetesCommands() []string { return append([]string(nil), kubernetesCommands...) }

// stagingModules are the staging modules k8s.io/kubernetes replaces with local paths;
// a dependent module must replace them with their released versions.
var stagingModules = []string{
	"api", "apiextensions-apiserver", "apimachinery", "apiserver", "cli-runtime", "client-go",
	"cloud-provider", "cluster-bootstrap", "code-generator", "component-base", "component-helpers",
	"controller-manager", "cri-api", "cri-client", "csi-translation-lib", "dynamic-resource-allocation",
	"endpointslice", "externaljwt", "kms", "kube-aggregator", "kube-controller-manager", "kube-proxy",
	"kube-scheduler", "kubectl", "kubelet", "metrics", "mount-utils", "pod-security-admission",
	"sample-apiserver", "sample-cli-plugin", "sample-controller",
}

// Kubernetes is one static binary holding kube-apiserver, kube-controller-manager,
// kube-scheduler, kubelet, kube-proxy and kubectl, chosen by the name it is run as
// (the old hyperkube idea): one link instead of six.
func Kubernetes() Program {
	staging := "v0" + strings.TrimPrefix(KubernetesVersion, "v1")
	var gomod strings.Builder
	fmt.Fprintf(&gomod, "module afbuild/kubernetes\n\ngo 1.25.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", KubernetesVersion)
	for _, m := range stagingModules {
		fmt.Fprintf(&gomod, "\tk8s.io/%s => k8s.io/%s %s\n", m, m, staging)
	}
	gomod.WriteString(")\n")
	var ld []string
	parts := strings.SplitN(strings.TrimPrefix(KubernetesVersion, "v"), ".", 3)
	for _, kv := range [][2]string{{"gitVersion", KubernetesVersion}, {"gitMajor", parts[0]}, {"gitMinor", parts[1]}, {"gitTreeState", "clean"}} {
		for _, pkg := range []string{"k8s.io/client-go/pkg/version", "k8s.io/component-base/version"} {
			ld = append(ld, fmt.Sprintf("-X %s.%s=%s", pkg, kv[0], kv[1]))
		}
	}
	return Program{
		Name:    "afkube",
		Version: KubernetesVersion,
		GoMod:   gomod.String(),
		Files:   map[string]string{"main.go": kubernetesMain},
		Package: ".",
		LDFlags: "-s -w " + strings.Join(ld, " "),
	}
}

const kubernetesMain = `// Command afkube runs one Kubernetes component, chosen by the name it is run as.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	_ "time/tzdata"

	_ "k8s.io/client-go/plugin/pkg/client/auth"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	name := filepath.Base(os.Args[0])
	switch name {
	case "kube-apiserver":
		os.Exit(cli.Run(apiserver.NewAPIServerCommand()))
	case "kube-controller-manager":
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	case "kube-scheduler":
		os.Exit(cli.Run(scheduler.NewSchedulerCommand()))
	case "kubelet":
		os.Exit(cli.Run(kubelet.NewKubeletCommand(context.Background())))
	case "kube-proxy":
		os.Exit(cli.Run(proxy.NewProxyCommand()))
	case "kubectl":
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) // nolint:errcheck
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
	default:
		fmt.Fprintf(os.Stderr, "afkube: run me as one of kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl (not %q)\n", name)
		os.Exit(2)
	}
}
`
