package scenario

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The origin's service_time map: its distribution, and the rules that tie
// its mean to the model's.

var dists = []string{DistFixed, DistExponential, DistLognormal, DistEmpirical}

const (
	maxSigma   = 4   // lognormal: p99/p50 = e^9.3, about 11,000
	maxBuckets = 100 // empirical: Envoy's histograms have 20, Prometheus's defaults 11
	// scaleTolerance is how far a scale written in service_time may be
	// from the model's mean: a fitter's rounding, not a second opinion.
	scaleTolerance = 0.01
)

func serviceTimeObject(st *ServiceTime) *object {
	var (
		withMean = []string{DistFixed, DistExponential}
		logn     = []string{DistLognormal}
		emp      = []string{DistEmpirical}
	)
	return &object{
		selector: "dist", kind: &st.Dist, kinds: dists, absentKind: DistFixed, what: "dist: %s",
		fields: []field{
			{key: "mean", kinds: withMean, v: duration{&st.Mean}},
			{key: "median", kinds: logn, v: duration{&st.Median}},
			{key: "sigma", kinds: logn, need: true, v: number{&st.Sigma}},
			{key: "buckets", kinds: emp, need: true, why: "(the cumulative buckets of a histogram, such as [{le: 5ms, fraction: 0.3}, {le: +Inf, fraction: 1}])", v: list[Bucket]{&st.Buckets, bucketObject}},
		},
		check: st.check,
	}
}

func bucketObject(b *Bucket) *object {
	return &object{
		fields: []field{
			{key: "le", need: true, v: bound{&b.Le}},
			{key: "fraction", need: true, v: number{&b.Fraction}},
		},
	}
}

// serviceTime is the origin's service_time: the map, left out of a file
// when it says what its absence does (fixed, no scale), so that files
// written before it existed are written the same.
type serviceTime struct{ st *ServiceTime }

func (v serviceTime) read(d *decoder, n *yaml.Node, path string) error {
	if err := serviceTimeObject(v.st).read(d, n, path); err != nil {
		return err
	}
	if v.st.Dist == DistFixed {
		v.st.Dist = "" // as absent: the zero value is fixed
	}
	return nil
}

func (v serviceTime) write() *yaml.Node {
	if v.zero() {
		return nil
	}
	return serviceTimeObject(v.st).write()
}

func (v serviceTime) zero() bool {
	return v.st.IsFixed() && v.st.Mean == 0
}

func (v serviceTime) validate(c *checker, path string) {
	serviceTimeObject(v.st).validate(c, path)
}

// bound is a bucket's upper bound: a duration, or +Inf.
type bound struct{ p *time.Duration }

func (v bound) read(d *decoder, n *yaml.Node, path string) error {
	if r := resolve(n); r.Kind == yaml.ScalarNode && isInf(r.Value) {
		*v.p = Inf
		return nil
	}
	return duration(v).read(d, n, path)
}

// isInf reports whether s is +Inf as Prometheus writes it, or YAML's .inf.
func isInf(s string) bool {
	switch strings.ToLower(s) {
	case "+inf", "inf", ".inf", "+.inf":
		return true
	}
	return false
}

func (v bound) write() *yaml.Node {
	if *v.p == Inf {
		return str("+Inf")
	}
	return duration(v).write()
}

func (v bound) zero() bool { return *v.p == 0 }

func (st *ServiceTime) check(c *checker, path string) {
	at := func(key string) string { return join(path, key) }
	positive := func(key string, d time.Duration) {
		if d != 0 && !(d > 0 && d <= maxWait) {
			c.fail(at(key), "must be more than 0 and at most %s (or absent: the model's mean), got %s", show(maxWait), show(d))
		}
	}
	switch st.Dist {
	case DistLognormal:
		positive("median", st.Median)
		over(c, at("sigma"), st.Sigma, 0, maxSigma)
	case DistEmpirical:
		st.checkBuckets(c, at("buckets"))
	default:
		positive("mean", st.Mean)
	}
}

// checkBuckets holds the rules of a cumulative histogram: bounds that
// grow, shares that never fall, and every request in the last bucket.
func (st *ServiceTime) checkBuckets(c *checker, path string) {
	bs := st.Buckets
	if n := len(bs); n == 0 || n > maxBuckets {
		c.fail(path, "must hold 1 to %d buckets, got %d", maxBuckets, n)
		return
	}
	finite := false
	for i, b := range bs {
		at := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case b.Le != Inf && !(b.Le > 0 && b.Le <= maxWait):
			c.fail(at+".le", "must be more than 0 and at most %s, or +Inf, got %s", show(maxWait), show(b.Le))
		case i > 0 && b.Le <= bs[i-1].Le:
			c.fail(at+".le", "must be more than the bucket before's (%s): bounds grow, and +Inf comes last, got %s", showBound(bs[i-1].Le), showBound(b.Le))
		case !(b.Fraction >= 0 && b.Fraction <= 1):
			c.fail(at+".fraction", "must be in [0, 1], got %s", c.show(at+".fraction", b.Fraction))
		case i > 0 && b.Fraction < bs[i-1].Fraction:
			c.fail(at+".fraction", "must be at least the bucket before's (%s): buckets are cumulative, each counts the requests at most its le takes, got %s", show(bs[i-1].Fraction), show(b.Fraction))
		}
		finite = finite || b.Le != Inf
	}
	if !c.ok() {
		return
	}
	last := fmt.Sprintf("%s[%d]", path, len(bs)-1)
	switch {
	case !finite:
		c.fail(last+".le", "the buckets need a finite bound: with only +Inf, the service time has no scale")
	case bs[len(bs)-1].Fraction != 1:
		c.fail(last+".fraction", "the last bucket holds every request: fraction 1 (a Prometheus histogram's +Inf bucket), got %s", show(bs[len(bs)-1].Fraction))
	}
}

func showBound(d time.Duration) string {
	if d == Inf {
		return "+Inf"
	}
	return show(d)
}

// checkServiceTime ties the service time's scale, when it states one, to
// the model's mean: the mean is the model's, and the distribution may only
// agree with it.
func (o *Origin) checkServiceTime(c *checker, path string) {
	st := &o.ServiceTime
	scale, ok := st.Scale()
	if !ok || !c.ok() {
		return
	}
	key := map[string]string{DistLognormal: "median", DistEmpirical: "buckets"}[st.Dist]
	if key == "" {
		key = "mean"
	}
	at := join(path, "service_time."+key)
	if st.Dist == DistLognormal {
		// The mean a median stands for: say it, or the numbers do not add up.
		key = fmt.Sprintf("median %s with sigma %s (a mean of %s)", show(st.Median), show(st.Sigma), show(scale.Round(time.Microsecond)))
	} else if st.Dist == DistEmpirical {
		key = fmt.Sprintf("buckets' mean %s", show(scale.Round(time.Microsecond)))
	} else {
		key = "mean " + show(scale)
	}
	var mean time.Duration
	var says string
	switch o.Model {
	case ModelQueue:
		mean = time.Duration(float64(o.Workers) / o.Capacity * float64(time.Second))
		says = fmt.Sprintf("%s.capacity %s with %s.workers %d make it %s (workers / capacity); for this mean, capacity: %s",
			path, show(o.Capacity), path, o.Workers, show(mean), strconv.FormatFloat(float64(o.Workers)/scale.Seconds(), 'g', 6, 64))
	case ModelConcurrency:
		mean = o.Base
		says = fmt.Sprintf("%s.base is %s (the mean with nothing else in service)", path, show(mean))
	default:
		mean = o.Latency
		says = fmt.Sprintf("%s.latency is %s", path, show(mean))
	}
	if math.Abs(float64(scale-mean)) > scaleTolerance*float64(mean) {
		c.fail(at, "the %s contradicts the model's mean service time: %s. The model's fields set the mean and service_time its shape: make them agree within 1%%, or leave the scale out of service_time", key, says)
	}
}
