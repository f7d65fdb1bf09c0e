package resilotel

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/retrystorm/retrystorm/resil/admission"
)

// The attribute keys of a Shedder's metrics.
const (
	ShedderName = attribute.Key("resil.shedder.name")
	ShedReason  = attribute.Key("resil.shed.reason")
)

// ShedInstruments are one [admission.Shedder]'s OpenTelemetry instruments: a
// server's admission control, as the Prometheus exporter turns them into
// the names resilprom.RegisterShedder registers:
//
//	resil.shed.admitted      counter {request}  resil_shed_admitted_total
//	resil.shed.refused       counter {request}  resil_shed_refused_total, by resil.shed.reason:
//	                                             expired, too_late, caller_left, limit, queue_full, queue_timeout
//	resil.shed.dropped       counter {request}  resil_shed_dropped_total
//	resil.shed.inflight      gauge   {request}  resil_shed_inflight
//	resil.shed.queued        gauge   {request}  resil_shed_queued
//	resil.concurrency_limit  gauge   {request}  resil_concurrency_limit (with a Limiter)
//	resil.shed.service_time  gauge   s          resil_shed_service_time_seconds
//
// Every one carries resil.shedder.name (Options.Name) and
// Options.Attributes. They are read from [admission.Shedder.Stats] when the
// reader collects, so they cost the requests nothing. Make them with
// [InstrumentShedder]; the zero value is not usable. They are safe for
// concurrent use.
type ShedInstruments struct {
	reg metric.Registration
}

// InstrumentShedder creates s's instruments on the meter provider and
// starts reporting; Options.Buckets and NoSpanEvents are not used (a
// Shedder decides before a request's work, on no span of its own). Call
// Close to stop.
func InstrumentShedder(s *admission.Shedder, o Options) (*ShedInstruments, error) {
	if s == nil {
		return nil, errors.New("resilotel: a Shedder is required")
	}
	m, err := o.meter()
	if err != nil {
		return nil, err
	}
	base := append([]attribute.KeyValue{ShedderName.String(o.Name)}, o.Attributes...)
	all := metric.WithAttributeSet(attribute.NewSet(base...))
	var byReason [admission.NumShedReasons]metric.MeasurementOption
	for r := admission.ShedReason(1); r < admission.NumShedReasons; r++ {
		kv := append(append([]attribute.KeyValue(nil), base...), ShedReason.String(r.String()))
		byReason[r] = metric.WithAttributeSet(attribute.NewSet(kv...))
	}

	var obs []metric.Observable
	counter := func(name, desc string) (metric.Int64ObservableCounter, error) {
		c, err := m.Int64ObservableCounter(name, metric.WithUnit("{request}"), metric.WithDescription(desc))
		obs = append(obs, c)
		return c, err
	}
	gauge := func(name, desc string) (metric.Int64ObservableGauge, error) {
		g, err := m.Int64ObservableGauge(name, metric.WithUnit("{request}"), metric.WithDescription(desc))
		obs = append(obs, g)
		return g, err
	}
	admitted, err := counter("resil.shed.admitted", "Requests the server admitted.")
	if err != nil {
		return nil, err
	}
	refused, err := counter("resil.shed.refused", "Requests the server refused before their work, by reason.")
	if err != nil {
		return nil, err
	}
	dropped, err := counter("resil.shed.dropped", "Admitted requests that ended dropped: their deadline passed while they ran.")
	if err != nil {
		return nil, err
	}
	inflight, err := gauge("resil.shed.inflight", "Requests admitted and not yet ended.")
	if err != nil {
		return nil, err
	}
	queued, err := gauge("resil.shed.queued", "Requests waiting for a slot under the concurrency limit.")
	if err != nil {
		return nil, err
	}
	limit, err := gauge("resil.concurrency_limit", "The concurrency limit now.")
	if err != nil {
		return nil, err
	}
	service, err := m.Float64ObservableGauge("resil.shed.service_time", metric.WithUnit("s"),
		metric.WithDescription("The service-time estimate the deadline checks use."))
	if err != nil {
		return nil, err
	}
	obs = append(obs, service)
	i := &ShedInstruments{}
	i.reg, err = m.RegisterCallback(func(_ context.Context, ob metric.Observer) error {
		st := s.Stats()
		ob.ObserveInt64(admitted, int64(st.Admitted), all)
		// Every reason, at zero too, so that rates over them are defined
		// from the start (as resilprom sends them).
		for r := admission.ShedReason(1); r < admission.NumShedReasons; r++ {
			ob.ObserveInt64(refused, int64(st.Shed[r]), byReason[r])
		}
		ob.ObserveInt64(dropped, int64(st.Dropped), all)
		ob.ObserveInt64(inflight, int64(st.InFlight), all)
		ob.ObserveInt64(queued, int64(st.Queued), all)
		if st.HasLimit {
			ob.ObserveInt64(limit, int64(st.Limit), all)
		}
		ob.ObserveFloat64(service, st.ServiceTime.Seconds(), all)
		return nil
	}, obs...)
	if err != nil {
		return nil, err
	}
	return i, nil
}

// Close stops reporting: it unregisters the callback.
func (i *ShedInstruments) Close() error { return i.reg.Unregister() }
