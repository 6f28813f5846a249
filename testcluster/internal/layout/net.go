package layout

// Names of what the cluster creates in the kernel. Teardown removes these.
const (
	Bridge = "af-cni0" // the CNI bridge; its address is the node's IP
	// BridgeMAC is set on the bridge when it is made. Without it Linux gives the bridge the
	// lowest MAC among its ports, so it changes when a pod's veth comes or goes, and every pod
	// that still has the old one in its ARP cache loses the way off its subnet (its gateway)
	// until it asks again, while pods on the bridge still answer. Seen: a gate in a namespace
	// without policies read that second as "every route denied" while pods were being deleted.
	BridgeMAC    = "02:af:00:00:00:01"
	InetNetns    = "af-inet"   // network namespace holding the fake internet's hosts
	InetVethHost = "af-inet0"  // host end of the veth to InetNetns
	MetaNetns    = "af-meta"   // network namespace holding the fake metadata server
	MetaVethHost = "af-meta0"  // host end of the veth to MetaNetns
	GuardTable   = "af_guard"  // nftables table (family inet) that drops escapes
	NodeName     = "af-node"   // the one node's name
	CNINetwork   = "af-bridge" // the CNI network name
)

// Addresses and ranges. Pods and services use private ranges that live only on
// this machine's bridge; the fake internet uses documentation and benchmarking
// ranges; nothing here is a real host.
const (
	PodCIDR     = "10.244.0.0/24"
	NodeIP      = "10.244.0.1" // on Bridge; also the API server's bind and advertise address
	ServiceCIDR = "10.96.0.0/16"
	APIService  = "10.96.0.1"
	ClusterDNS  = "10.96.0.10"

	// Transit links between the node and the test namespaces (RFC 2544 range).
	InetHostIP = "198.18.0.1"
	InetNsIP   = "198.18.0.2"
	MetaHostIP = "198.18.0.5"
	MetaNsIP   = "198.18.0.6"
	TransitLen = 30

	// The fake internet (RFC 5737 TEST-NET-2). Not TEST-NET-3 (203.0.113.0/24):
	// on this kind of machine the package registries answer at 203.0.113.80,
	// and routing that range into a namespace cut the machine off from them.
	FakeInternetCIDR = "198.51.100.0/24"
	PublicIP         = "198.51.100.10" // TCP echo :80, UDP echo :7
	ResolverIP       = "198.51.100.53" // DNS :53 (UDP and TCP)
	AllowedAPIIP     = "198.51.100.80" // HTTP :80 and HTTPS :443 for AllowedAPIHost
	BlockedAPIIP     = "198.51.100.81" // HTTP :80 and HTTPS :443 for BlockedAPIHost

	// The fake metadata server: link-local, deliberately not 169.254.169.254.
	MetadataIP = "169.254.77.1"
	// RealMetadataIP is never contacted; the guard drops anything sent to it.
	RealMetadataIP = "169.254.169.254"

	// Names the fake resolver answers, all in FakeDomain.
	FakeDomain     = "af.test"
	PublicHost     = "public." + FakeDomain
	AllowedAPIHost = "allowed-api." + FakeDomain
	BlockedAPIHost = "blocked-api." + FakeDomain

	// NodeServicePort is a host-network TCP and UDP echo on NodeIP inside the NodePort
	// range, as a host-network ingress or agent would listen: the node route's target.
	NodeServicePort = "30999"

	// Loopback services.
	RegistryAddr     = "127.0.0.1:5000"
	EtcdClientURL    = "http://127.0.0.1:12379"
	EtcdPeerURL      = "http://127.0.0.1:12380"
	APIServerPort    = 6443
	IngressHTTPAddr  = "127.0.0.1:18080"
	IngressHTTPSAddr = "127.0.0.1:18443"
	// KubeNetworkPoliciesMetricsAddr is where kube-network-policies serves its metrics
	// (its queue's counters among them).
	KubeNetworkPoliciesMetricsAddr = "127.0.0.1:19080"
)

// The IPv6 half of a dual-stack cluster (afcluster up -dual-stack). The cluster's own ranges
// are unique local addresses of its own (fd61:af::/32, apart from any range of this machine);
// the fake internet uses the documentation range 2001:db8::/32, and the fake metadata server a
// unique local address that is not a cloud's.
const (
	PodCIDR6     = "fd61:af:244::/64"
	NodeIP6      = "fd61:af:244::1" // on Bridge, beside NodeIP
	ServiceCIDR6 = "fd61:af:96::/108"

	InetHostIP6   = "fd61:af:18::1"
	InetNsIP6     = "fd61:af:18::2"
	MetaHostIP6   = "fd61:af:18::5"
	MetaNsIP6     = "fd61:af:18::6"
	TransitLen6   = 126
	TransitCIDR6  = "fd61:af:18::/120"
	ClusterRange6 = "fd61:af::/32" // every IPv6 range of the cluster's own

	FakeInternetCIDR6 = "2001:db8:af::/48"
	PublicIP6         = "2001:db8:af::10" // TCP echo :80, UDP echo :7
	ResolverIP6       = "2001:db8:af::53" // DNS :53 (UDP and TCP)
	MetadataIP6       = "fd61:af:a9fe::1" // the fake metadata server over IPv6
	// RealMetadataIP6 is a cloud's IPv6 metadata address (gate.DefaultMetadata6): never
	// contacted, the guard drops anything sent to it.
	RealMetadataIP6 = "fd00:ec2::254"
)

// FakeHosts maps each name the fake resolver answers to its address.
func FakeHosts() map[string]string {
	return map[string]string{
		PublicHost:               PublicIP,
		AllowedAPIHost:           AllowedAPIIP,
		BlockedAPIHost:           BlockedAPIIP,
		"metadata." + FakeDomain: MetadataIP,
	}
}
