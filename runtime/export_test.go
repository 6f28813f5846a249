package runtime

import "time"

// SetNow gives a Namer a clock of the test's.
func SetNow(n *Namer, now func() time.Time) { n.now = now }
