package main

import (
	"bytes"
	"testing"
	"time"
)

func ms(xs ...int) []time.Duration {
	d := make([]time.Duration, len(xs))
	for i, x := range xs {
		d[i] = time.Duration(x) * time.Millisecond
	}
	return d
}

// TestSummaries: each figure the load-image page's claims rest on is
// printed in its place, medians of odd and even counts, ratios as kind's
// time over hwk's; swapping two fails here.
func TestSummaries(t *testing.T) {
	var b bytes.Buffer
	// A 489 MiB image: hwk's median 2 s, kind's 5 s.
	ratio := printFirstLoads(&b, 489<<20, [2][]time.Duration{ms(3000, 2000, 1000), ms(4000, 6000, 5000)})
	if want := "median: hwk load-image 2s (244 MiB/s), kind load docker-image 5s (98 MiB/s)\n"; b.String() != want {
		t.Errorf("printFirstLoads:\n%q\nwant\n%q", b.String(), want)
	}
	if ratio != 2.5 {
		t.Errorf("first-load ratio %v, want 2.5", ratio)
	}

	b.Reset()
	rtimes := [2][2][]time.Duration{
		{ms(1100, 1300), ms(2600, 2400)},                  // warm: hwk 1.2 s, kind 2.5 s
		{ms(11230, 9000, 12000), ms(26410, 30000, 20000)}, // cold: hwk 11.23 s, kind 26.41 s
	}
	printRebuilds(&b, rtimes, 493<<20, ms(10580, 9170, 11000), ratio)
	want := `median rebuild, warm: hwk load-image 1.2s, kind load docker-image 2.5s
median rebuild, cold: hwk load-image 11.23s, kind load docker-image 26.41s
the rebuilt image is 493 MiB as docker save writes it; docker save alone, from a cold page cache: median 10.58s of 3
first-load ratio: 2.50
rebuild ratio: 2.08
cold rebuild ratio: 2.35
`
	if b.String() != want {
		t.Errorf("printRebuilds:\n%s\nwant\n%s", b.String(), want)
	}
}
