// Package deploy holds what an operator applies to a cluster, as YAML: ci/ (the identity the
// action uses, bounded by RBAC and by admission policies) and app/ (the GitHub App). It has no
// code; its tests apply those files as written on the test cluster and try them as an
// attacker and as the product would.
package deploy
