package lab

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

//go:embed live.html
var livePage []byte

// Live is the lab's live view: a page with no external assets that plots
// offered load, error rate, retries/requests and the origin's queue as the
// run goes, with the trigger window shaded and, dashed, what the simulator
// predicts for the same scenario. The page gets its data as server-sent
// events from /events: a "run" event first (the scenario, the simulator's
// series), then "fleet" and "tick" events. A page that connects late gets
// everything so far, so a reload loses nothing.
//
// Make one with NewLive and serve Handler; Close ends every stream. A nil
// *Live shows nothing, so a run works without one. It is safe for concurrent
// use.
type Live struct {
	mu     sync.Mutex
	names  []string
	run    []byte // the "run" event
	fleets []*liveFleet
	subs   map[chan []byte]struct{}
	closed bool
}

// liveFleet is what the page has been told of one fleet.
type liveFleet struct {
	status []byte   // its latest "fleet" event
	ticks  [][]byte // its latest "tick" event per tick
}

// liveRun is the "run" event.
type liveRun struct {
	Scenario        string      `json:"scenario"`
	Ticks           int         `json:"ticks"`
	TickSeconds     float64     `json:"tick_seconds"`
	WallTickSeconds float64     `json:"wall_tick_seconds"`
	Trigger         *sim.Window `json:"trigger"`
	Fleets          []string    `json:"fleets"`
	Sim             []liveSim   `json:"sim"`
}

type liveSim struct {
	Name              string    `json:"name"`
	Offered           []int64   `json:"offered"`
	ErrorRate         []float64 `json:"error_rate"`
	RetriesPerRequest []float64 `json:"retries_per_request"`
	Queue             []int64   `json:"queue"`
}

type liveStatus struct {
	Fleet     int        `json:"fleet"`
	Name      string     `json:"name"`
	State     string     `json:"state"` // running or done
	Recovered *bool      `json:"recovered,omitempty"`
	Recovery  *int       `json:"recovery_ticks,omitempty"`
	RPR       *float64   `json:"retries_per_request,omitempty"`
	Peak      *int64     `json:"peak_offered,omitempty"`
	Links     *liveLinks `json:"links,omitempty"`
}

type liveLinks struct {
	Origin  string `json:"origin"`
	Gateway string `json:"gateway"`
	Faults  string `json:"faults"` // the admin endpoint, with the run's token
}

type liveTick struct {
	Fleet int `json:"fleet"`
	tickValues
}

// NewLive returns a live view of sc run with the given wall-clock tick. It
// shows the named fleets, in that order (nil: sc's); reference, if set, is
// the simulator's result for them, drawn dashed. Fleets are matched by
// name.
func NewLive(sc *scenario.Scenario, fleets []string, wallTick time.Duration, reference *sim.Result) *Live {
	r := liveRun{
		Scenario: sc.Name, Ticks: int((sc.Duration + sc.Tick - 1) / sc.Tick),
		TickSeconds: sc.Tick.Seconds(), WallTickSeconds: wallTick.Seconds(),
		Trigger: sim.TriggerSpan(sc), Fleets: fleets, Sim: []liveSim{},
	}
	if r.Fleets == nil {
		for _, f := range sc.Fleets {
			r.Fleets = append(r.Fleets, f.Name)
		}
	}
	if reference != nil {
		for _, f := range reference.Fleets {
			s := f.Series
			r.Sim = append(r.Sim, liveSim{Name: f.Name, Offered: s.Offered, ErrorRate: s.ErrorRate, RetriesPerRequest: s.RetriesPerRequest, Queue: s.Queue})
		}
	}
	l := &Live{subs: make(map[chan []byte]struct{}), names: r.Fleets}
	l.run = frame("run", r)
	l.fleets = make([]*liveFleet, len(r.Fleets))
	for i := range l.fleets {
		l.fleets[i] = &liveFleet{ticks: make([][]byte, r.Ticks)}
	}
	return l
}

// frame renders one server-sent event.
func frame(event string, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		data = []byte("null")
	}
	return fmt.Appendf(nil, "event: %s\ndata: %s\n\n", event, data)
}

// Handler serves the page at / and the events at /events.
func (l *Live) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:")
		_, _ = w.Write(livePage)
	})
	mux.HandleFunc("GET /events", l.serveEvents)
	return mux
}

// subscriberBuffer is how many events a slow page may fall behind by before
// it is cut off (its EventSource reconnects and starts afresh), and
// maxSubscribers how many pages may follow at once: each holds its buffer.
const (
	subscriberBuffer = 4096
	maxSubscribers   = 32
)

// subscribe returns what happened so far and a channel for what comes, or
// false when maxSubscribers pages follow already.
func (l *Live) subscribe() ([][]byte, chan []byte, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.subs) >= maxSubscribers {
		return nil, nil, false
	}
	past := [][]byte{l.run}
	for _, f := range l.fleets {
		if f.status != nil {
			past = append(past, f.status)
		}
		for _, t := range f.ticks {
			if t != nil {
				past = append(past, t)
			}
		}
	}
	if l.closed {
		return past, nil, true
	}
	ch := make(chan []byte, subscriberBuffer)
	l.subs[ch] = struct{}{}
	return past, ch, true
}

func (l *Live) unsubscribe(ch chan []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.subs[ch]; ok {
		delete(l.subs, ch)
		close(ch)
	}
}

// publish sends f to every page; a page too far behind is cut off. The
// lock is held.
func (l *Live) publish(f []byte) {
	for ch := range l.subs {
		select {
		case ch <- f:
		default:
			delete(l.subs, ch)
			close(ch)
		}
	}
}

func (l *Live) serveEvents(w http.ResponseWriter, r *http.Request) {
	past, ch, ok := l.subscribe()
	if !ok {
		http.Error(w, fmt.Sprintf("lab: %d pages follow the live view already", maxSubscribers), http.StatusServiceUnavailable)
		return
	}
	if ch != nil {
		defer l.unsubscribe(ch)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	for _, f := range past {
		if _, err := w.Write(f); err != nil {
			return
		}
	}
	if err := rc.Flush(); err != nil || ch == nil {
		return
	}
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		var f []byte
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			f = []byte(": ping\n\n")
		case x, ok := <-ch:
			if !ok {
				return
			}
			f = x
		}
		if _, err := w.Write(f); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// Close ends every stream; pages keep what they drew.
func (l *Live) Close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.publish(frame("end", struct{}{}))
	l.closed = true
	for ch := range l.subs {
		delete(l.subs, ch)
		close(ch)
	}
}

func (l *Live) setStatus(i int, s liveStatus) {
	if l == nil || i < 0 || i >= len(l.fleets) {
		return
	}
	f := frame("fleet", s)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fleets[i].status = f
	l.publish(f)
}

// beginFleet says the fleet called name is running, and returns its
// index on the page (-1: the page does not show it).
func (l *Live) beginFleet(name string, links liveLinks) int {
	if l == nil {
		return -1
	}
	i := slices.Index(l.names, name)
	l.setStatus(i, liveStatus{Fleet: i, Name: name, State: "running", Links: &links})
	return i
}

func (l *Live) endFleet(i int, fr sim.FleetResult) {
	s := fr.Summary
	l.setStatus(i, liveStatus{
		Fleet: i, Name: fr.Name, State: "done",
		Recovered: &s.Recovered, Recovery: s.RecoveryTicks, RPR: &s.RetriesPerRequest, Peak: &s.PeakOffered,
	})
}

func (l *Live) tick(i int, v tickValues) {
	if l == nil || i < 0 || i >= len(l.fleets) || v.Tick < 0 || v.Tick >= len(l.fleets[i].ticks) {
		return
	}
	f := frame("tick", liveTick{Fleet: i, tickValues: v})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fleets[i].ticks[v.Tick] = f
	l.publish(f)
}
