// Package layout fixes where the test cluster keeps its files and which
// addresses its parts use. Everything the cluster makes on the machine is named
// here, so that teardown can find and remove exactly that.
package layout

import (
	"fmt"
	"os"
	"path/filepath"
)

// Dirs are the directories of one machine's test cluster.
type Dirs struct {
	// Cache holds builds and image archives, kept across cluster-down (keyed by version).
	Cache string
	// State holds the cluster's data (etcd, certificates, kubelet, containerd, registry); removed by down.
	State string
	// Run holds pid files and sockets; removed by down.
	Run string
}

// DefaultDirs returns the directories used when nothing overrides them:
// AF_CACHE_DIR or $HOME/.cache/af for the cache.
func DefaultDirs() (Dirs, error) {
	cache := os.Getenv("AF_CACHE_DIR")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return Dirs{}, fmt.Errorf("find the cache directory: %w", err)
		}
		cache = filepath.Join(home, ".cache", "af")
	}
	return Dirs{Cache: cache, State: "/var/lib/af-testcluster", Run: "/run/af-testcluster"}, nil
}

// Logs is where the components write their logs while the cluster runs.
func (d Dirs) Logs() string { return filepath.Join(d.State, "log") }

// LastLogs is where down keeps the logs of the last cluster.
func (d Dirs) LastLogs() string { return filepath.Join(d.Cache, "last-logs") }

// PKI holds certificates and keys.
func (d Dirs) PKI() string { return filepath.Join(d.State, "pki") }

// Kubeconfig is the administrator's kubeconfig.
func (d Dirs) Kubeconfig() string { return filepath.Join(d.State, "admin.kubeconfig") }

// Bin holds links to every binary the cluster uses (kubectl among them), for PATH.
func (d Dirs) Bin() string { return filepath.Join(d.State, "bin") }

// Pids holds one pid file per started process.
func (d Dirs) Pids() string { return filepath.Join(d.Run, "pids") }

// ContainerdSocket is the CRI and containerd API socket.
func (d Dirs) ContainerdSocket() string { return filepath.Join(d.Run, "containerd", "containerd.sock") }

// StateFile records how the running cluster was started (enforcer, uplink, start time).
func (d Dirs) StateFile() string { return filepath.Join(d.Run, "cluster.json") }

// LockFile serialises starting and stopping across processes and test packages.
func LockFile() string { return "/run/af-testcluster.lock" }
