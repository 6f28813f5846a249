package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Command is what a service or migration runs: either exec form (a list, run as it is) or shell
// form (a string, run by /bin/sh -c). It keeps the form it was written in.
type Command struct {
	Exec  []string
	Shell string
}

// IsZero reports whether no command was given.
func (c Command) IsZero() bool { return c.Exec == nil && c.Shell == "" }

// Argv returns the argument vector to run.
func (c Command) Argv() []string {
	if c.Exec != nil {
		return append([]string(nil), c.Exec...)
	}
	if c.Shell != "" {
		return []string{"/bin/sh", "-c", c.Shell}
	}
	return nil
}

// MarshalJSON writes the command in the form it was written in.
func (c Command) MarshalJSON() ([]byte, error) {
	if c.Exec != nil {
		return json.Marshal(c.Exec)
	}
	return json.Marshal(c.Shell)
}

// UnmarshalJSON reads a string (shell form) or a list of strings (exec form).
func (c *Command) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*c = Command{Shell: s}
		return nil
	}
	var l []string
	if err := json.Unmarshal(b, &l); err != nil {
		return errors.New("a command is a string or a list of strings")
	}
	if l == nil {
		l = []string{}
	}
	*c = Command{Exec: l}
	return nil
}

// Duration is a length of time as written in the manifest: Go duration syntax (90m, 72h,
// 1h30m) or a whole number of days (3d).
type Duration string

// Value parses the duration.
func (d Duration) Value() (time.Duration, error) {
	s := string(d)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || days == "" || days[0] == '+' || days[0] == '-' {
			return 0, fmt.Errorf("%q is not a duration: write a whole number of days like 3d, or a duration like 72h or 90m", s)
		}
		if n > 100000 {
			return 0, fmt.Errorf("%q is too long", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: write one like 72h, 90m or 3d", s)
	}
	return v, nil
}

// Quantity is a Kubernetes resource quantity as written in the manifest (250m, 1Gi).
type Quantity string

// Value parses the quantity.
func (q Quantity) Value() (resource.Quantity, error) {
	v, err := resource.ParseQuantity(string(q))
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("%q is not a Kubernetes quantity", string(q))
	}
	return v, nil
}
