package manifest

import (
	"fmt"
	"strconv"
	"strings"
)

var cronMacros = map[string]bool{
	"@yearly": true, "@annually": true, "@monthly": true, "@weekly": true,
	"@daily": true, "@midnight": true, "@hourly": true,
}

type cronField struct {
	name   string
	lo, hi int
	names  []string // names[i] stands for lo+i
}

var cronFields = []cronField{
	{name: "minute", lo: 0, hi: 59},
	{name: "hour", lo: 0, hi: 23},
	{name: "day of month", lo: 1, hi: 31},
	{name: "month", lo: 1, hi: 12, names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
	{name: "day of week", lo: 0, hi: 7, names: []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}},
}

// checkSchedule validates a five-field cron expression or a macro.
func checkSchedule(s string) error {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "@") {
		if cronMacros[s] {
			return nil
		}
		return fmt.Errorf("%q is not a schedule macro (@hourly, @daily, @weekly, @monthly, @yearly)", s)
	}
	fields := strings.Fields(s)
	if len(fields) != len(cronFields) {
		return fmt.Errorf("%q has %d fields; a schedule has five: minute hour day-of-month month day-of-week", s, len(fields))
	}
	for i, f := range fields {
		if err := cronFields[i].check(f); err != nil {
			return fmt.Errorf("%q: %s field: %w", s, cronFields[i].name, err)
		}
	}
	return nil
}

func (cf cronField) check(field string) error {
	for _, item := range strings.Split(field, ",") {
		if item == "" {
			return fmt.Errorf("%q has an empty list item", field)
		}
		rng, step, hasStep := strings.Cut(item, "/")
		if hasStep {
			n, err := strconv.Atoi(step)
			if err != nil || n < 1 || n > cf.hi-cf.lo+1 {
				return fmt.Errorf("%q has a step that is not a number from 1 to %d", item, cf.hi-cf.lo+1)
			}
		}
		if rng == "*" || rng == "?" && (cf.name == "day of month" || cf.name == "day of week") {
			continue
		}
		a, b, isRange := strings.Cut(rng, "-")
		lo, err := cf.value(a)
		if err != nil {
			return err
		}
		if isRange {
			hi, err := cf.value(b)
			if err != nil {
				return err
			}
			if hi < lo {
				return fmt.Errorf("%q is a range that ends before it starts", rng)
			}
		}
	}
	return nil
}

func (cf cronField) value(s string) (int, error) {
	for i, n := range cf.names {
		if strings.EqualFold(s, n) {
			return cf.lo + i, nil
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || strings.HasPrefix(s, "+") {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if n < cf.lo || n > cf.hi {
		return 0, fmt.Errorf("%d is out of range (%d-%d)", n, cf.lo, cf.hi)
	}
	return n, nil
}
