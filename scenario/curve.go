package scenario

import "math"

// Load-dependent latency (issue 39): a server whose every request takes
// longer the busier it is, faster than linearly, as a garbage-collected
// runtime does under memory pressure or a database under lock contention.
// The queue model's workers are its threads or connections; the share u
// of them busy when a request starts (itself included) multiplies its
// service time by the curve's value at u. At low load the curve is near
// 1 and the model is the plain queue; near u = 1 it is many times that,
// so the server's capacity falls as its load rises, and a burst that
// fills it can leave it stuck there: the GC death spiral.

// Curves of load-dependent latency (LoadLatency.Curve).
const (
	CurveLinear      = "linear"      // 1 + factor × u
	CurvePower       = "power"       // 1 + factor × u^exponent
	CurveExponential = "exponential" // e^(factor × u)
)

var curves = []string{CurveLinear, CurvePower, CurveExponential}

// LoadLatency is the queue model's load-dependent latency. The zero value
// (Curve "") is flat: the model as it always was.
type LoadLatency struct {
	// Curve is linear, power or exponential.
	Curve string
	// Factor is the curve's steepness: at full load the service time is
	// 1 + Factor times the mean (linear, power) or e^Factor times it
	// (exponential). In (0, 100] (exponential: (0, 20]).
	Factor float64
	// Exponent is the power curve's exponent, in [1, 10]; default 2.
	Exponent float64
}

// Flat reports whether the curve is 1 everywhere: no load latency.
func (l LoadLatency) Flat() bool { return l.Curve == "" }

// At is the curve at u, the share of workers busy (clamped to [0, 1]):
// what a request's service time is multiplied by. It is 1 for the flat
// curve.
func (l LoadLatency) At(u float64) float64 {
	u = min(max(u, 0), 1)
	switch l.Curve {
	case CurveLinear:
		return 1 + l.Factor*u
	case CurvePower:
		return 1 + l.Factor*math.Pow(u, l.Exponent)
	case CurveExponential:
		return math.Exp(l.Factor * u)
	}
	return 1
}

func loadLatencyValue(l *LoadLatency) value {
	return unlessUnset{o: loadLatencyObject(l), set: func() bool { return *l != LoadLatency{} }}
}

func loadLatencyObject(l *LoadLatency) *object {
	return &object{
		selector: "curve", kind: &l.Curve, kinds: curves, what: "curve: %s",
		fields: []field{
			{key: "factor", need: true, v: number{&l.Factor}},
			{key: "exponent", kinds: []string{CurvePower}, v: number{&l.Exponent}},
		},
		preset: func(curve string) {
			if curve == CurvePower {
				l.Exponent = 2
			}
		},
		check: l.check,
	}
}

func (l *LoadLatency) check(c *checker, path string) {
	if l.Flat() {
		return
	}
	at := func(key string) string { return join(path, key) }
	top := 100.0
	if l.Curve == CurveExponential {
		top = 20 // e^20 is half a billion times the mean
	}
	over(c, at("factor"), l.Factor, 0, top)
	if l.Curve == CurvePower {
		in(c, at("exponent"), l.Exponent, 1, 10)
	}
}
