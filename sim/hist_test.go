package sim

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestHistogramJSON: a Histogram survives its JSON, sums with another's
// counts, and its JSON is refused, naming what is wrong, when it is not
// one.
func TestHistogramJSON(t *testing.T) {
	var a, b Histogram
	for i := range 1000 {
		a.Add(time.Duration(i) * time.Millisecond)
		b.Add(time.Duration(1000+i) * time.Millisecond)
	}
	data, err := json.Marshal(&a)
	if err != nil {
		t.Fatal(err)
	}
	var back Histogram
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back != a {
		t.Errorf("round trip: %s", data)
	}
	back.Merge(&b)
	if n, p50 := back.Count(), back.Quantile(0.5); n != 2000 || p50 < 970*time.Millisecond || p50 > 1030*time.Millisecond {
		t.Errorf("merged: %d values, p50 %s; want 2000 and 1 s within 3%%", n, p50)
	}
	for _, c := range []struct{ in, want string }{
		{`{"buckets":[1,2],"counts":[1]}`, "2 buckets but 1 counts"},
		{`{"buckets":[2048],"counts":[1]}`, "buckets[0] = 2048, out of [0, 2048)"},
		{`{"buckets":[-1],"counts":[1]}`, "out of"},
		{`{"buckets":[5,5],"counts":[1,1]}`, "buckets[1] = 5, not after 5"},
		{`{"buckets":[5],"counts":[-1]}`, "counts[0] = -1"},
		{`{"buckets":[5,6],"counts":[9223372036854775807,1]}`, "counts[1] = 1, negative or too many"},
	} {
		var h Histogram
		if err := json.Unmarshal([]byte(c.in), &h); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.in, err, c.want)
		}
	}
}
