// Package harden holds what af knows about closing the holes of the NetworkPolicy enforcers it
// has met: which enforcer a node's packet filter belongs to (Detect), the rules that close
// each hole af's probe finds on it (Plan), putting them in place, checking and removing them
// through the node's own iptables (Apply, Present, Remove), the agent that keeps them
// (Agent: `af harden`, shipped as deploy/harden/), and the fix af check advises for each open
// route (Advise). It knows nothing of Kubernetes' API: the agent's caller reads the node's pod
// ranges and writes its reports.
package harden

// Where the agent reports: one ConfigMap per node in Namespace (deploy/harden's), labelled
// ReportLabel=ReportLabelValue, its report (JSON) under ReportKey. af check reads them.
const (
	Namespace        = "af-harden"
	ReportLabel      = "app.kubernetes.io/component"
	ReportLabelValue = "af-harden-report"
	ReportKey        = "report.json"
)
