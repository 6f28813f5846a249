# Make targets of af's test cluster (testcluster/). Included by the top Makefile.
# Everything runs as root; `make cluster-up` installs the Debian packages it
# needs (containerd runc containernetworking-plugins etcd-server docker-registry
# nftables iptables ipset conntrack busybox-static iproute2) and builds the
# upstream components through the Go module proxy into $(HOME)/.cache/af.
#
#   make cluster-up [ENFORCER=...]    start (a fresh) cluster; ENFORCER=kube-router (default),
#                                     kube-network-policies, or none (no NetworkPolicy enforcer)
#   make cluster-down                 remove everything the cluster made (idempotent)
#   make cluster-status               processes, node, pods, guard counters (fails if one is not 0)
#   make cluster-env                  print `export KUBECONFIG=... PATH=...`; use: eval "$$(make -s cluster-env)"
#   make test-cluster                 the testcluster suite with kube-router, then again on
#                                     ENFORCER=none, then the after-down check (leaves the cluster down)

ENFORCER ?= kube-router
AFCLUSTER ?= go run ./testcluster/cmd/afcluster
TESTCLUSTER_GOTEST ?= go test -count=1 -v -timeout 30m

.PHONY: cluster-up cluster-down cluster-status cluster-env test-cluster

cluster-up:
	$(AFCLUSTER) up -enforcer $(ENFORCER)

cluster-down:
	$(AFCLUSTER) down

cluster-status:
	$(AFCLUSTER) status

cluster-env:
	@$(AFCLUSTER) env

# Phase 1 runs on a cluster with kube-router (the running one if it has it);
# phase 2 restarts it without an enforcer for the negative control; phase 3
# takes it down and checks that nothing is left. A test run on a cluster state it
# does not need fails (it reads the state off the machine), so each phase names
# its tests.
test-cluster:
	$(AFCLUSTER) ensure -enforcer kube-router
	AF_TESTCLUSTER=1 $(TESTCLUSTER_GOTEST) -skip '^(TestNegativeControl|TestNothingLeftAfterDown|TestEnforcerAway)$$' ./testcluster/...
	$(AFCLUSTER) up -enforcer none
	AF_TESTCLUSTER=1 $(TESTCLUSTER_GOTEST) -run 'TestSmoke|TestNegativeControl|TestGuardCountersZero' ./testcluster/
	$(AFCLUSTER) down
	AF_TESTCLUSTER_DOWN=1 $(TESTCLUSTER_GOTEST) -run TestNothingLeftAfterDown ./testcluster/
