// Package testcluster gives af's tests, CI and demo a real single-node
// Kubernetes cluster on this machine, assembled from pinned upstream parts
// (Kubernetes v1.35.4 built through the module proxy; etcd, containerd, runc and
// the CNI plugins from Debian; CoreDNS; a local registry; Traefik; kube-router's
// NetworkPolicy controller), with a fake internet beside it in network
// namespaces the cluster creates.
//
// Tests get the cluster with Ensure, which starts it if it is not running and
// is safe to call from several test packages at once (a file lock):
//
//	h, err := testcluster.Ensure(ctx)
//	out, err := h.Kubectl(ctx, "", "get", "pods", "-A")
//
// The cluster needs root. Nothing it runs ever sends a packet off the machine:
// pods and test hosts reach only each other, and an nftables guard drops (and
// counts) anything that would leave by the machine's real uplink and anything
// addressed to 169.254.169.254.
package testcluster
