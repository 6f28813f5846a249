//go:build !linux

package gate

import (
	"context"
	"errors"
	"net/netip"
	"time"
)

// WhoAnswers needs Linux's socket error queue; the gate and the probe run in Linux pods.
func WhoAnswers(context.Context, netip.AddrPort, time.Duration) (Reply, error) {
	return Reply{}, errors.New("telling a reset from ICMP needs Linux (IP_RECVERR)")
}
