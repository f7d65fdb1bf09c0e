package scenario

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// queueHead is a queue origin of one worker at 100/s (a mean service time
// of 10ms) on line 3, with service_time on line 4 and a fleet after.
func queueHead(st string) string {
	return "duration: 60s\ntraffic: {rate: 10}\norigin:\n  model: queue\n  capacity: 100\n  service_time: " + st + "\n" + fleet
}

func TestServiceTimeParses(t *testing.T) {
	for _, tc := range []struct {
		name, st string
		want     ServiceTime
		scale    time.Duration // 0: none stated
	}{
		{"fixed", "{dist: fixed}", ServiceTime{}, 0},
		{"fixed with its mean", "{dist: fixed, mean: 10ms}", ServiceTime{Mean: 10 * time.Millisecond}, 10 * time.Millisecond},
		{"exponential", "{dist: exponential}", ServiceTime{Dist: DistExponential}, 0},
		{"exponential with its mean", "{dist: exponential, mean: 10ms}", ServiceTime{Dist: DistExponential, Mean: 10 * time.Millisecond}, 10 * time.Millisecond},
		{"lognormal", "{dist: lognormal, sigma: 0.5}", ServiceTime{Dist: DistLognormal, Sigma: 0.5}, 0},
		// exp(0.5²/2) = 1.1331: a median of 8.825ms is a mean of 10ms.
		{"lognormal with its median", "{dist: lognormal, median: 8.825ms, sigma: 0.5}", ServiceTime{Dist: DistLognormal, Median: 8825 * time.Microsecond, Sigma: 0.5}, 10_000_035},
		// Half in (0, 5ms], mean 2.5ms; 0.3 in (5ms, 20ms], mean 12.5ms;
		// 0.2 in +Inf, at 20ms: 1.25 + 3.75 + 4 = 9ms.
		{"empirical", "[{dist: empirical}]", ServiceTime{}, 0},
	} {
		if tc.name == "empirical" {
			continue // below, with its lines
		}
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse("t.yaml", []byte(queueHead(tc.st)))
			if err != nil {
				t.Fatal(err)
			}
			got := s.Origin.ServiceTime
			if got.Dist != tc.want.Dist || got.Mean != tc.want.Mean || got.Median != tc.want.Median || got.Sigma != tc.want.Sigma {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if scale, ok := got.Scale(); scale != tc.scale || ok != (tc.scale > 0) {
				t.Errorf("Scale() = %v, %v, want %v", scale, ok, tc.scale)
			}
			checkValid(t, s)
		})
	}
	in := "duration: 60s\ntraffic: {rate: 10}\norigin:\n  model: queue\n  capacity: 111.111\n  service_time:\n    dist: empirical\n    buckets:\n" +
		"      - {le: 5ms, fraction: 0.5}\n      - {le: 20ms, fraction: 0.8}\n      - {le: +Inf, fraction: 1}\n" + fleet
	s, err := Parse("t.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	st := s.Origin.ServiceTime
	if len(st.Buckets) != 3 || st.Buckets[2] != (Bucket{Le: Inf, Fraction: 1}) || st.Buckets[0] != (Bucket{5 * time.Millisecond, 0.5}) {
		t.Errorf("buckets %+v", st.Buckets)
	}
	if m := st.BucketMean(); math.Abs(m-9e6) > 1e-3 {
		t.Errorf("BucketMean = %g ns, want 9ms", m)
	}
	out := checkValid(t, s)
	if !strings.Contains(string(out), "le: +Inf") {
		t.Errorf("+Inf not written as Prometheus writes it:\n%s", out)
	}
}

// TestServiceTimeAbsentWritesNothing: a scenario without service_time is
// written as before the key existed, so every file and golden output
// stays the same.
func TestServiceTimeAbsentWritesNothing(t *testing.T) {
	for _, st := range []string{"", "  service_time: {dist: fixed}\n"} {
		s, err := Parse("t.yaml", []byte("duration: 60s\ntraffic: {rate: 10}\norigin:\n  model: queue\n  capacity: 100\n"+st+fleet))
		if err != nil {
			t.Fatal(err)
		}
		if out := checkValid(t, s); strings.Contains(string(out), "dist") {
			t.Errorf("wrote service_time for %q:\n%s", st, out)
		}
	}
}

func TestServiceTimeErrors(t *testing.T) {
	const f = "origin.service_time"
	for _, tc := range []struct {
		name, st, at, field, msg string
	}{
		{"unknown dist", "{dist: normal}", "6:24", f + ".dist", `unknown value "normal"`},
		{"no dist", "{mean: 10ms}", "6:17", f, "dist is required"},
		{"sigma on exponential", "{dist: exponential, sigma: 1}", "6:37", f + ".sigma", "sigma does not apply to dist: exponential; it is a setting of dist: lognormal"},
		{"lognormal without sigma", "{dist: lognormal, median: 5ms}", "6:17", f, "sigma is required for dist: lognormal"},
		{"sigma not finite", "{dist: lognormal, sigma: .nan}", "6:42", f + ".sigma", "must be a finite number"},
		{"sigma too wide", "{dist: lognormal, sigma: 5}", "6:42", f + ".sigma", "must be in (0, 4]"},
		{"sigma zero", "{dist: lognormal, sigma: 0}", "6:42", f + ".sigma", "must be in (0, 4]"},
		{"negative mean", "{dist: exponential, mean: -1ms}", "6:43", f + ".mean", "must be more than 0"},
		{"mean contradicts capacity", "{dist: exponential, mean: 20ms}", "6:43", f + ".mean",
			"origin.capacity 100 with origin.workers 1 make it 10ms (workers / capacity); for this mean, capacity: 50"},
		{"median contradicts capacity", "{dist: lognormal, median: 10ms, sigma: 0.5}", "6:43", f + ".median", "a mean of 11331us"},
		{"empirical without buckets", "{dist: empirical}", "6:17", f, "buckets is required for dist: empirical"},
		{"empty buckets", "{dist: empirical, buckets: []}", "6:44", f + ".buckets", "must hold 1 to 100 buckets"},
		{"bucket without fraction", "{dist: empirical, buckets: [{le: 5ms}]}", "6:45", f + ".buckets[0]", "fraction is required"},
		{"le not a duration", "{dist: empirical, buckets: [{le: 5, fraction: 1}]}", "6:50", f + ".buckets[0].le", "a duration"},
		{"bounds fall", "{dist: empirical, buckets: [{le: 5ms, fraction: 0.5}, {le: 2ms, fraction: 1}]}", "6:76", f + ".buckets[1].le", "must be more than the bucket before's (5ms)"},
		{"inf not last", "{dist: empirical, buckets: [{le: +Inf, fraction: 0.5}, {le: 2ms, fraction: 1}]}", "6:77", f + ".buckets[1].le", "+Inf comes last"},
		{"not cumulative", "{dist: empirical, buckets: [{le: 5ms, fraction: 0.5}, {le: 20ms, fraction: 0.4}]}", "6:92", f + ".buckets[1].fraction", "buckets are cumulative"},
		{"fraction over 1", "{dist: empirical, buckets: [{le: 5ms, fraction: 1.5}]}", "6:65", f + ".buckets[0].fraction", "must be in [0, 1]"},
		{"last not 1", "{dist: empirical, buckets: [{le: 5ms, fraction: 0.5}, {le: 20ms, fraction: 0.9}]}", "6:92", f + ".buckets[1].fraction", "fraction 1"},
		{"only inf", "{dist: empirical, buckets: [{le: +Inf, fraction: 1}]}", "6:50", f + ".buckets[0].le", "need a finite bound"},
		{"buckets contradict capacity", "{dist: empirical, buckets: [{le: 40ms, fraction: 1}]}", "6:44", f + ".buckets", "buckets' mean 20ms contradicts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(queueHead(tc.st)))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse error = %v, want an *Error", err)
			}
			if at := position(e); at != tc.at || e.Field != tc.field || !strings.Contains(e.Msg, tc.msg) {
				t.Errorf("%v (at %s, field %q)\nwant at %s, field %q, containing %q", e, at, e.Field, tc.at, tc.field, tc.msg)
			}
		})
	}
}

// TestServiceTimeOtherModels: the mean a scale must agree with is base
// for the concurrency model and latency for the capacity model, and the
// message names the field.
func TestServiceTimeOtherModels(t *testing.T) {
	for _, tc := range []struct{ origin, msg string }{
		{"{model: concurrency, base: 10ms, service_time: {dist: exponential, mean: 10ms}}", ""},
		{"{model: concurrency, base: 20ms, service_time: {dist: exponential, mean: 10ms}}", "origin.base is 20ms"},
		{"{model: capacity, capacity: 10, service_time: {dist: exponential, mean: 10ms}}", ""},
		{"{model: capacity, capacity: 10, latency: 50ms, service_time: {dist: exponential, mean: 10ms}}", "origin.latency is 50ms"},
	} {
		s, err := Parse("t.yaml", []byte("duration: 60s\ntraffic: {rate: 10}\norigin: "+tc.origin+"\n"+fleet))
		switch {
		case tc.msg == "" && err != nil:
			t.Errorf("%s: %v", tc.origin, err)
		case tc.msg == "":
			checkValid(t, s)
		case err == nil || !strings.Contains(err.Error(), tc.msg):
			t.Errorf("%s: got %v, want %q", tc.origin, err, tc.msg)
		}
	}
}
