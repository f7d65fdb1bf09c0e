package lab

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The lab's servers register their metrics on registries of their own,
// never on Prometheus's global one: two labs, or a lab in a test binary,
// must not collide.

// latencyBuckets span half a millisecond to 16 s, doubling: an answer at
// once on loopback to a timeout in unscaled time.
var latencyBuckets = prometheus.ExponentialBuckets(0.0005, 2, 16)

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func counterVec(name, help, label string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
}

func gaugeFunc(name, help string, f func() float64) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
}

func latencyHistogram(name, help string) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets})
}

// registerAll registers every collector on reg, for the component named.
func registerAll(reg prometheus.Registerer, component string, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("lab: %s metrics: %w", component, err)
		}
	}
	return nil
}

// underLock is f, read with mu held: a gauge of a server's state.
func underLock(mu *sync.Mutex, f func() float64) func() float64 {
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return f()
	}
}

// one is 1 for true and 0 for false, as a gauge shows a state.
func one(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
