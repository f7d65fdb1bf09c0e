package lab

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// env is the state of the origin the faults set: it changes only at the
// start or end of a fault.
type env struct {
	capacity float64 // per second
	errRate  float64 // background and injected error shares combined
	rejRate  float64 // answers a rejection trigger turns into 503s (of those errRate leaves)
	outage   bool    // nothing answers
	mode     string  // how, while outage: scenario.OutageRefuse, OutageBlackhole or OutageStall
	factor   float64 // latency multiplier
}

// stalled reports whether a stall is in force: the server takes requests
// in and sends nothing out.
func (e env) stalled() bool { return e.outage && e.mode == scenario.OutageStall }

// envAt combines the faults in force at t (time since the origin's start)
// by the scenario's rule, the simulator's too (scenario.At), for a server
// that is the whole of o. Load triggers are the load generator's.
func envAt(o *scenario.Origin, faults []scenario.Trigger, t time.Duration) env {
	base := scenario.Conditions{Capacity: o.Capacity, ErrorRate: o.ErrorRate, Factor: []float64{1}}
	c := scenario.At(base, faults, t)
	return env{capacity: c.Capacity, errRate: c.ErrorRate, rejRate: c.RejectRate, outage: c.Outage, mode: c.Mode, factor: c.Factor[0]}
}

// replicaEnvAt is envAt for replica r of o's replicas (o.Replicas of them,
// at least 2, or faults naming one), as the simulator combines them
// (sim/env.go, sim/client.go): an equal share of the capacity, the
// replica's own latency factor and error rate (the origin's combined with
// its faults and triggers), and an outage of the whole origin or, when
// there is none, of the replica alone.
func replicaEnvAt(o *scenario.Origin, faults []scenario.Trigger, t time.Duration, r int) env {
	n := max(o.Replicas, 1)
	sc := scenario.Scenario{Origin: *o, Triggers: faults}
	c := scenario.At(sc.Base(n), faults, t)
	e := env{capacity: c.Capacity / float64(n), errRate: c.ErrorRate, rejRate: c.RejectRate, outage: c.Outage, mode: c.Mode, factor: c.Factor[r]}
	if c.ReplicaErrorRate != nil {
		e.errRate = c.ReplicaErrorRate[r]
		if m := c.ReplicaOutage[r]; m != "" && !e.outage {
			e.outage, e.mode = true, m
		}
	}
	return e
}

// nextChange returns the first start or end of a fault after t, or false.
func nextChange(faults []scenario.Trigger, t time.Duration) (time.Duration, bool) {
	best, ok := time.Duration(0), false
	for _, f := range faults {
		for _, b := range [2]time.Duration{f.At, f.End()} {
			if b > t && (!ok || b < best) {
				best, ok = b, true
			}
		}
	}
	return best, ok
}

// faultView is a fault as the admin endpoint shows it: times in seconds
// from the origin's start.
type faultView struct {
	Kind      string  `json:"kind"`
	At        float64 `json:"at"`
	For       float64 `json:"for"`
	Capacity  float64 `json:"capacity,omitempty"`
	ErrorRate float64 `json:"error_rate,omitempty"`
	Factor    float64 `json:"factor,omitempty"`
	Mode      string  `json:"mode,omitempty"`
	Source    string  `json:"source"` // "scenario" or "admin"
}

type adminState struct {
	Now       float64     `json:"now"` // seconds since the origin's start
	Capacity  float64     `json:"capacity"`
	ErrorRate float64     `json:"error_rate"`
	Outage    bool        `json:"outage"`
	Mode      string      `json:"outage_mode,omitempty"`
	Factor    float64     `json:"latency_factor"`
	Queue     int         `json:"queue"`
	Faults    []faultView `json:"faults"`
}

// serveAdmin is the fault-injection endpoint, /admin/faults:
//
//	GET                              the state and every fault
//	POST kind=capacity&capacity=40&for=5s   a capacity dip, from now
//	POST kind=errors&error_rate=0.2&for=5s  an error blip
//	POST kind=outage&for=5s&mode=stall      nothing answers (mode: refuse, blackhole, the default, or stall)
//	POST kind=latency&factor=3&for=5s       slower service
//	DELETE                           ends the faults injected here
//
// Values are in the origin's own units (its capacity per second of wall
// time, real durations); an optional at= delays the start. Both at and
// for are at most maxFaultTime.
//
// Every request must carry the origin's AdminToken, as token=... in the
// query or form, or as "Authorization: Bearer ...": the lab makes one per
// run and prints it, and its live view links with it. (The server it runs
// on refuses foreign Host names and cross-origin writes besides: see
// Server.) Faults that have ended are forgotten, and at most
// maxInjectedFaults injected ones are kept: more is refused with 429.
func (o *Origin) serveAdmin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10) // a form of a few fields
	if !o.authorized(r) {
		http.Error(w, "lab: /admin/faults needs this run's token (token=... or Authorization: Bearer ...): the lab prints it", http.StatusForbidden)
		return
	}
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		f, err := parseFault(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if !o.inject(f) {
			http.Error(w, fmt.Sprintf("lab: %d injected faults are in force or to come; at most %d (DELETE ends them)", maxInjectedFaults, maxInjectedFaults), http.StatusTooManyRequests)
			return
		}
	case http.MethodDelete:
		o.clearInjected()
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(o.adminState())
}

// Bounds of the admin endpoint: a fault's start and length, and how many
// injected faults are kept (each costs the fault schedule a look at every
// change).
const (
	maxFaultTime      = 24 * time.Hour
	maxInjectedFaults = 100
)

// authorized reports whether r carries the origin's admin token. An origin
// without one authorizes nothing.
func (o *Origin) authorized(r *http.Request) bool {
	want := o.cfg.AdminToken
	if want == "" {
		return false
	}
	got := r.URL.Query().Get("token")
	if h, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		got = h
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// newToken returns a fresh secret for OriginConfig.AdminToken: 128 random
// bits, in hexadecimal.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b[:])
}

func parseFault(r *http.Request) (scenario.Trigger, error) {
	if err := r.ParseForm(); err != nil {
		return scenario.Trigger{}, err
	}
	f := scenario.Trigger{Kind: r.Form.Get("kind")}
	dur := func(name string, need bool) (time.Duration, error) {
		v := r.Form.Get(name)
		if v == "" {
			if need {
				return 0, fmt.Errorf("%s is required", name)
			}
			return 0, nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || !(d >= 0 && d <= maxFaultTime) {
			return 0, fmt.Errorf("%s: want a duration in [0s, %s], such as 5s, got %q", name, maxFaultTime, v)
		}
		return d, nil
	}
	num := func(name string, lo, hi float64) (float64, error) {
		v := r.Form.Get(name)
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || !(x >= lo && x <= hi) { // NaN fails this
			return 0, fmt.Errorf("%s: want a number in [%g, %g], got %q", name, lo, hi, v)
		}
		return x, nil
	}
	var err error
	if f.At, err = dur("at", false); err != nil {
		return f, err
	}
	if f.For, err = dur("for", true); err != nil {
		return f, err
	}
	if f.For == 0 {
		return f, fmt.Errorf("for must be more than 0")
	}
	switch f.Kind {
	case scenario.TriggerCapacity:
		f.Capacity, err = num("capacity", 0, 1e9)
	case scenario.TriggerErrors:
		f.ErrorRate, err = num("error_rate", 0, 1)
	case scenario.TriggerLatency:
		f.Factor, err = num("factor", 1, 1e6)
	case scenario.TriggerOutage:
		f.Mode = r.Form.Get("mode")
		switch f.Mode {
		case "":
			f.Mode = scenario.OutageBlackhole
		case scenario.OutageRefuse, scenario.OutageRefusePod, scenario.OutageBlackhole, scenario.OutageStall:
		default:
			err = fmt.Errorf("mode: want refuse, blackhole or stall, got %q", f.Mode)
		}
	default:
		err = fmt.Errorf("kind: want capacity, errors, outage or latency, got %q", f.Kind)
	}
	return f, err
}

// inject adds a fault that starts f.At from now, forgetting those that
// have ended, and reports false, adding nothing, when maxInjectedFaults
// are kept already.
func (o *Origin) inject(f scenario.Trigger) bool {
	now := time.Now()
	o.mu.Lock()
	elapsed := now.Sub(o.start)
	o.injected = slices.DeleteFunc(o.injected, func(g scenario.Trigger) bool { return g.End() <= elapsed })
	if len(o.injected) >= maxInjectedFaults {
		o.mu.Unlock()
		return false
	}
	f.At += elapsed
	o.injected = append(o.injected, f)
	o.applyFaults(now)
	o.mu.Unlock()
	o.reschedule()
	return true
}

// clearInjected ends every fault injected through the endpoint.
func (o *Origin) clearInjected() {
	o.mu.Lock()
	o.injected = nil
	o.applyFaults(time.Now())
	o.mu.Unlock()
	o.reschedule()
}

// applyFaults puts in force the env the faults make at now, and returns
// the faults. The lock is held.
func (o *Origin) applyFaults(now time.Time) []scenario.Trigger {
	faults := o.faults()
	o.setEnv(o.envAt(faults, now.Sub(o.start)), now)
	return faults
}

// reschedule wakes the fault schedule, to wait for the next boundary of
// the faults as they now are.
func (o *Origin) reschedule() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// faults returns the scenario's faults and the injected ones.
func (o *Origin) faults() []scenario.Trigger {
	return append(slices.Clone(o.cfg.Triggers), o.injected...)
}

func (o *Origin) adminState() adminState {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := adminState{
		Now:      time.Since(o.start).Seconds(),
		Capacity: o.env.capacity, ErrorRate: o.env.errRate, Outage: o.env.outage, Factor: o.env.factor,
		Mode:   o.env.mode,
		Queue:  o.model.Queued(),
		Faults: []faultView{},
	}
	for i, f := range o.faults() {
		src := "scenario"
		if i >= len(o.cfg.Triggers) {
			src = "admin"
		}
		s.Faults = append(s.Faults, faultView{
			Kind: f.Kind, At: f.At.Seconds(), For: f.For.Seconds(),
			Capacity: f.Capacity, ErrorRate: f.ErrorRate, Factor: f.Factor, Mode: f.Mode, Source: src,
		})
	}
	return s
}
