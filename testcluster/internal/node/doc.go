// Package node brings the test cluster's single node up and down: the fake
// internet's namespaces, the nftables guard, certificates, configuration files
// and the processes (etcd, containerd, registry, Kubernetes, the enforcer),
// and a teardown that removes everything of those it finds, also after a crash.
package node
