// Package fakenet holds the small servers and clients of the test cluster's
// fake internet: a DNS responder for a few test names, TCP and UDP echo,
// HTTP(S) servers for the test names and a fake metadata server. The servers
// run inside network namespaces the cluster creates; the clients run in pods
// (through the aftool test image) and in tests. Nothing here knows a real host.
package fakenet
