package benchup

import (
	"math"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []int64
		want string
	}{
		{nil, "-"},
		{[]int64{7}, "7"},
		{[]int64{9, 1, 5}, "5"},
		{[]int64{4, 1, 2, 9}, "3"},
		{[]int64{1, 2}, "1.5"},
	} {
		if got := Num(Median(c.in)); got != c.want {
			t.Errorf("Median(%v) = %s, want %s", c.in, got, c.want)
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("the median of nothing is a number")
	}
}
