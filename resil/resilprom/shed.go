package resilprom

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrystorm/retrystorm/resil/admission"
)

// ShedCollector is the Prometheus collector of one [admission.Shedder]. Make
// one with [RegisterShedder] or [RegisterShedderWith]; the zero value is not
// usable. Its metrics are read from [admission.Shedder.Stats] at scrape time, so
// they cost the requests nothing. It is safe for concurrent use.
type ShedCollector struct {
	s          *admission.Shedder
	admitted   *prometheus.Desc
	refused    *prometheus.Desc
	dropped    *prometheus.Desc
	inflight   *prometheus.Desc
	queued     *prometheus.Desc
	limit      *prometheus.Desc
	service    *prometheus.Desc
	registerer prometheus.Registerer
}

// RegisterShedder registers s's collector on reg with the label name=name.
// It returns an error if reg refuses it (for example a second shedder with
// the same name).
func RegisterShedder(reg prometheus.Registerer, name string, s *admission.Shedder) (*ShedCollector, error) {
	return RegisterShedderWith(reg, s, Options{Name: name})
}

// RegisterShedderWith is [RegisterShedder] with options; Buckets is not
// used.
func RegisterShedderWith(reg prometheus.Registerer, s *admission.Shedder, o Options) (*ShedCollector, error) {
	if reg == nil || s == nil {
		return nil, errors.New("resilprom: a Registerer and a Shedder are required")
	}
	labels, err := o.labels()
	if err != nil {
		return nil, err
	}
	desc := func(metric, help string, variable ...string) *prometheus.Desc {
		return prometheus.NewDesc("resil_"+metric, help, variable, labels)
	}
	c := &ShedCollector{
		s:          s,
		admitted:   desc("shed_admitted_total", "Requests the server admitted."),
		refused:    desc("shed_refused_total", "Requests the server refused before their work, by reason.", "reason"),
		dropped:    desc("shed_dropped_total", "Admitted requests that ended dropped: their deadline passed while they ran."),
		inflight:   desc("shed_inflight", "Requests admitted and not yet ended."),
		queued:     desc("shed_queued", "Requests waiting for a slot under the concurrency limit."),
		limit:      desc("concurrency_limit", "The concurrency limit now."),
		service:    desc("shed_service_time_seconds", "The service-time estimate the deadline checks use."),
		registerer: reg,
	}
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	return c, nil
}

// Describe sends the descriptors of every metric.
func (c *ShedCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.admitted, c.refused, c.dropped, c.inflight, c.queued, c.limit, c.service} {
		ch <- d
	}
}

// Collect reads the Shedder's Stats and sends the metrics. Every reason is
// sent, at zero too, so that rates over them are defined from the start.
func (c *ShedCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	ch <- prometheus.MustNewConstMetric(c.admitted, prometheus.CounterValue, float64(st.Admitted))
	for r := admission.ShedReason(1); r < admission.NumShedReasons; r++ {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(st.Shed[r]), r.String())
	}
	ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(st.Dropped))
	ch <- prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, float64(st.InFlight))
	ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(st.Queued))
	if st.HasLimit {
		ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(st.Limit))
	}
	ch <- prometheus.MustNewConstMetric(c.service, prometheus.GaugeValue, st.ServiceTime.Seconds())
}

// Unregister removes the collector from the Registerer it was registered
// on. It reports whether it was registered.
func (c *ShedCollector) Unregister() bool { return c.registerer.Unregister(c) }
