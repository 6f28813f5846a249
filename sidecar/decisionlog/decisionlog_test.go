package decisionlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"sync"
	"testing"
	"time"
)

func TestRingAndStream(t *testing.T) {
	var out bytes.Buffer
	l := New("shop-pr-1", 3, &out)
	base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for i := range 5 {
		l.Record(Entry{Time: base.Add(time.Duration(i) * time.Second), Via: "proxy", Host: "h", Allowed: i%2 == 0, Mode: "allow"})
	}
	got := l.Query(Filter{})
	if len(got) != 3 || got[0].Seq != 3 || got[2].Seq != 5 {
		t.Fatalf("ring = %+v", got)
	}
	if b := l.Query(Filter{Blocked: true}); len(b) != 1 || b[0].Seq != 4 {
		t.Errorf("blocked = %+v", b)
	}
	if s := l.Query(Filter{Since: base.Add(4 * time.Second)}); len(s) != 1 || s[0].Seq != 5 {
		t.Errorf("since = %+v", s)
	}
	if lim := l.Query(Filter{Limit: 2}); len(lim) != 2 || lim[1].Seq != 5 {
		t.Errorf("limit = %+v", lim)
	}
	l.Close()
	sc := bufio.NewScanner(&out)
	n := 0
	for sc.Scan() {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if e.Environment != "shop-pr-1" || e.Seq != uint64(n+1) {
			t.Errorf("line %d = %+v", n, e)
		}
		n++
	}
	if n != 5 {
		t.Errorf("%d lines, want 5", n)
	}
}

func TestConcurrentRecord(t *testing.T) {
	l := New("e", 100, nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				l.Record(Entry{Host: "x"})
				l.Query(Filter{Limit: 5})
			}
		}()
	}
	wg.Wait()
	l.Close()
	got := l.Query(Filter{})
	if len(got) != 100 || got[99].Seq != 8000 {
		t.Fatalf("len %d last %d", len(got), got[len(got)-1].Seq)
	}
}
