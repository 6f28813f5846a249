package benchup

import (
	"math"
	"slices"
	"strconv"
)

// Median is the middle of xs, or the mean of the two middle ones; NaN when xs is empty.
func Median(xs []int64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return float64(s[n/2])
	}
	return float64(s[n/2-1]+s[n/2]) / 2
}

// Num formats a figure as briefly as it is exact (1234, 1234.5); "-" for NaN.
func Num(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
