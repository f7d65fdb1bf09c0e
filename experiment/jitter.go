package experiment

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/resil"
)

const jitterTitle = "Jitter: a herd that failed at the same instant"

// Jitter drives resil.Backoff itself: a herd of clients that failed
// together, against spare capacity, and clients contending for one
// resource.
var Jitter = register(&Experiment{
	Name:    "jitter",
	Title:   jitterTitle,
	Summary: "a synchronised herd against spare capacity, and contention, for each kind of jitter",
	Order:   30,
	Page: Page{
		Cost:  70,
		Fixed: "The herd is the experiment's own: 200 clients that failed at the same instant, against 60 spare answers a tick, for every kind of jitter side by side. Change the seed to draw it again.",
	},
	Run: runJitter,
})

// The herd: these numbers are the experiment's, stated in its output.
const (
	herdClients  = 200
	herdSpare    = 60 // answers per tick the origin can spare
	herdTick     = time.Second
	herdBase     = 2 * time.Second
	herdCap      = 60 * time.Second
	herdMaxTicks = 600
	// Contention: one resource, one call at a time.
	contendHold = 10 * time.Millisecond
	contendBase = 10 * time.Millisecond
	contendCap  = 10 * time.Second
)

var contendClients = []int{1, 5, 10, 25, 50, 75, 100, 150, 200}

// jitterKind is one backoff under test.
type jitterKind struct {
	Name    string
	backoff func(base, cap time.Duration) resil.Backoff
}

var jitterKinds = []jitterKind{
	{"fixed", func(b, c time.Duration) resil.Backoff { return resil.Backoff{Schedule: resil.Fixed, Base: b, Cap: c} }},
	{"exponential", func(b, c time.Duration) resil.Backoff {
		return resil.Backoff{Schedule: resil.Exponential, Base: b, Cap: c}
	}},
	{"full", func(b, c time.Duration) resil.Backoff {
		return resil.Backoff{Schedule: resil.Exponential, Base: b, Cap: c, Jitter: resil.FullJitter}
	}},
	{"equal", func(b, c time.Duration) resil.Backoff {
		return resil.Backoff{Schedule: resil.Exponential, Base: b, Cap: c, Jitter: resil.EqualJitter}
	}},
	{"decorrelated", func(b, c time.Duration) resil.Backoff {
		return resil.Backoff{Schedule: resil.Exponential, Base: b, Cap: c, Jitter: resil.DecorrelatedJitter}
	}},
}

// herdResult is one jitter kind's herd.
type herdResult struct {
	Jitter       string  `json:"jitter"`
	Peak         int     `json:"peak"`
	Refail       int     `json:"refail"`
	Attempts     int     `json:"attempts"`
	DrainSeconds float64 `json:"drain_seconds"`
	Arrivals     []int   `json:"arrivals"`
}

// contentionResult is one jitter kind's contention curve.
type contentionResult struct {
	Jitter  string    `json:"jitter"`
	Clients []int     `json:"clients"`
	Work    []int     `json:"work"`
	Seconds []float64 `json:"seconds"`
}

type jitterJSON struct {
	Seed          uint64             `json:"seed"`
	Clients       int                `json:"clients"`
	SpareCapacity int                `json:"spare_capacity"`
	TickSeconds   float64            `json:"tick_seconds"`
	BaseSeconds   float64            `json:"base_seconds"`
	Herd          []herdResult       `json:"herd"`
	Contention    []contentionResult `json:"contention"`
	Claims        []report.Claim     `json:"claims"`
}

func runJitter(ctx context.Context, opts Options) (*Outcome, error) {
	seed := uint64(1)
	if opts.Seed != nil {
		seed = *opts.Seed
	}
	js := jitterJSON{Seed: seed, Clients: herdClients, SpareCapacity: herdSpare, TickSeconds: herdTick.Seconds(), BaseSeconds: herdBase.Seconds()}
	for i, k := range jitterKinds {
		src := rand.NewPCG(seed, uint64(i))
		js.Herd = append(js.Herd, herd(k.backoff(herdBase, herdCap), src))
		js.Herd[i].Jitter = k.Name
		c := contentionResult{Jitter: k.Name, Clients: contendClients}
		for _, n := range contendClients {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			work, took := contend(n, k.backoff(contendBase, contendCap), rand.NewPCG(seed, uint64(100+i)))
			c.Work = append(c.Work, work)
			c.Seconds = append(c.Seconds, round3(took.Seconds()))
		}
		js.Contention = append(js.Contention, c)
	}
	js.Claims = jitterClaims(js)
	sec := report.Section{
		ID:    "jitter",
		Title: jitterTitle,
		Intro: []string{
			fmt.Sprintf("%d clients failed at the same instant and retry against %d answers of spare capacity per %s tick; an arrival beyond it fails and retries again. Backoff base %s, cap %s, doubling; each kind is resil.Backoff with its jitter.",
				herdClients, herdSpare, herdTick, herdBase, herdCap),
			"A deterministic delay applied to a synchronised population produces a synchronised population: only randomness spreads a herd.",
		},
		Tables: []report.Table{herdTable(js.Herd), contentionTable(js.Contention)},
		Claims: js.Claims,
		Charts: jitterCharts(js),
		Notes: []string{fmt.Sprintf("Contention: N clients want one resource that serves one call at a time for %s; a call that finds it busy fails and retries (base %s, cap %s). Work is the calls made until every client succeeded (Marc Brooker, \"Exponential Backoff And Jitter\", 2015).",
			contendHold, contendBase, contendCap)},
	}
	return &Outcome{Name: "jitter", Claims: js.Claims, Section: sec, Findings: jitterFindings(js), JSON: js}, nil
}

// herd plays the synchronised herd: every client failed at time zero and
// makes its first retry after one backoff; an arrival in a tick that
// already took herdSpare answers fails and retries.
func herd(b resil.Backoff, src rand.Source) herdResult {
	r := herdResult{Arrivals: make([]int, 0, 64)}
	served := map[int]int{}
	r.Attempts = untilServed(herdClients, b, src, true, func(at time.Duration) (bool, bool) {
		tick := int(at / herdTick)
		if tick >= herdMaxTicks {
			return false, true
		}
		for len(r.Arrivals) <= tick {
			r.Arrivals = append(r.Arrivals, 0)
		}
		r.Arrivals[tick]++
		if served[tick] < herdSpare {
			served[tick]++
			r.DrainSeconds = max(r.DrainSeconds, at.Seconds())
			return true, false
		}
		r.Refail++
		return false, false
	}, 1_000_000)
	for _, a := range r.Arrivals {
		r.Peak = max(r.Peak, a)
	}
	r.DrainSeconds = round3(r.DrainSeconds)
	return r
}

// contend plays n clients wanting one resource that serves one call at a
// time: a call that finds it busy fails and backs off. It returns the calls
// made until all succeeded, and when the last one did.
func contend(n int, b resil.Backoff, src rand.Source) (int, time.Duration) {
	busyUntil := time.Duration(-1)
	var last time.Duration
	work := untilServed(n, b, src, false, func(at time.Duration) (bool, bool) {
		if at < busyUntil {
			return false, false
		}
		busyUntil = at + contendHold
		last = max(last, busyUntil)
		return true, false
	}, 1_000_000)
	return work, last
}

// untilServed plays n clients that retry with b until served. They all
// start at time zero: with a first call each, or, when failed is set, as if
// that call had just failed (their first arrival is a retry, one backoff
// later). Arrivals are taken in time order, ties by client, and serve says
// whether each is answered (or stops the play). It returns the arrivals
// made, at most limit.
func untilServed(n int, b resil.Backoff, src rand.Source, failed bool, serve func(at time.Duration) (served, stop bool), limit int) int {
	cs := make(clientHeap, n)
	for i := range cs {
		cs[i] = backingOff{id: i}
		if failed {
			d := b.Delay(1, 0, src)
			cs[i].at, cs[i].retry, cs[i].prev = d, 1, d
		}
	}
	heap.Init(&cs)
	arrivals := 0
	for len(cs) > 0 && arrivals < limit {
		c := &cs[0]
		arrivals++
		ok, stop := serve(c.at)
		if stop {
			break
		}
		if ok {
			heap.Pop(&cs)
			continue
		}
		c.retry++
		d := b.Delay(c.retry, c.prev, src)
		c.at, c.prev = c.at+d, d
		heap.Fix(&cs, 0)
	}
	return arrivals
}

// backingOff is one client between its tries.
type backingOff struct {
	id    int
	at    time.Duration // its next arrival
	retry int           // retries so far
	prev  time.Duration // its last backoff
}

// clientHeap orders clients by next arrival, then by id.
type clientHeap []backingOff

func (h clientHeap) Len() int { return len(h) }
func (h clientHeap) Less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].id < h[j].id)
}
func (h clientHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *clientHeap) Push(x any)   { *h = append(*h, x.(backingOff)) }
func (h *clientHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func herdTable(hs []herdResult) report.Table {
	t := report.Table{
		Title: fmt.Sprintf("The herd: %d clients, %d spare answers per tick", herdClients, herdSpare),
		Columns: []report.Column{
			{Name: "jitter"}, {Name: "peak", Align: report.Right}, {Name: "re-fail", Align: report.Right},
			{Name: "attempts", Align: report.Right}, {Name: "drained", Align: report.Right},
		},
		Emphasis: map[[2]int]bool{},
	}
	for i, h := range hs {
		t.Rows = append(t.Rows, []string{h.Jitter, report.Int(int64(h.Peak)), report.Int(int64(h.Refail)),
			report.Int(int64(h.Attempts)), fmt.Sprintf("%.1f s", h.DrainSeconds)})
		if h.Peak > herdSpare {
			t.Emphasis[[2]int{i, 1}] = true
		}
	}
	return t
}

func contentionTable(cs []contentionResult) report.Table {
	t := report.Table{Title: "Contention: calls until every client succeeded", Columns: []report.Column{{Name: "jitter"}}}
	show := []int{10, 50, 100, 200}
	for _, n := range show {
		t.Columns = append(t.Columns, report.Column{Name: fmt.Sprintf("N=%d", n), Align: report.Right})
	}
	for _, c := range cs {
		row := []string{c.Jitter}
		for _, n := range show {
			row = append(row, report.Int(int64(c.Work[slices.Index(c.Clients, n)])))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func jitterCharts(js jitterJSON) []report.Chart {
	n := 0
	for _, h := range js.Herd {
		n = max(n, len(h.Arrivals))
	}
	n = min(n, 40)
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(i)
	}
	arr := report.Chart{Title: "Arrivals per tick after a synchronised failure", XLabel: "time (s)", YLabel: "arrivals / s", X: x}
	for _, h := range js.Herd {
		y := make([]float64, n)
		for i := range y {
			if i < len(h.Arrivals) {
				y[i] = float64(h.Arrivals[i])
			}
		}
		arr.Lines = append(arr.Lines, report.Line{Name: h.Jitter, Y: y})
	}
	spare := make([]float64, n)
	for i := range spare {
		spare[i] = herdSpare
	}
	arr.Lines = append(arr.Lines, report.Line{Name: "spare capacity", Y: spare, Dashed: true})

	cx := make([]float64, len(contendClients))
	for i, c := range contendClients {
		cx[i] = float64(c)
	}
	work := report.Chart{Title: "Contention: total work against the number of clients", XLabel: "clients (N)", YLabel: "calls", X: cx}
	for _, c := range js.Contention {
		y := make([]float64, len(c.Work))
		for i, w := range c.Work {
			y[i] = float64(w)
		}
		work.Lines = append(work.Lines, report.Line{Name: c.Jitter, Y: y})
	}
	return []report.Chart{arr, work}
}

func jitterClaims(js jitterJSON) []report.Claim {
	by := map[string]herdResult{}
	for _, h := range js.Herd {
		by[h.Jitter] = h
	}
	var cs []report.Claim
	for _, k := range []string{"fixed", "exponential"} {
		h := by[k]
		cs = append(cs, report.Check(fmt.Sprintf("%s backoff keeps the herd synchronised: all %d clients arrive in one tick", k, herdClients),
			h.Peak == herdClients, map[string]any{"peak": h.Peak}, "peak %d", h.Peak))
	}
	e, f, d := by["equal"], by["full"], by["decorrelated"]
	cs = append(cs,
		report.Check("equal jitter keeps half of each delay fixed, so its first wave still lands in one tick",
			e.Peak == herdClients, map[string]any{"peak": e.Peak}, "peak %d", e.Peak),
		report.Check("full jitter spreads the herd, but its peak still overflows the spare capacity",
			f.Peak < herdClients && f.Peak > herdSpare, map[string]any{"peak": f.Peak, "refail": f.Refail},
			"peak %d into %d spare, %d re-fail", f.Peak, herdSpare, f.Refail),
		report.Check("decorrelated jitter has the lowest peak and re-fails fewer arrivals than full jitter",
			d.Peak < f.Peak && d.Peak < e.Peak && d.Refail < f.Refail, map[string]any{"peak": d.Peak, "refail": d.Refail, "full_refail": f.Refail},
			"peak %d, %d re-fail against %d", d.Peak, d.Refail, f.Refail))
	var none, full contentionResult
	for _, c := range js.Contention {
		switch c.Jitter {
		case "exponential":
			none = c
		case "full":
			full = c
		}
	}
	last := len(none.Work) - 1
	cs = append(cs, report.Check(fmt.Sprintf("under contention, full jitter does less work than plain exponential backoff at N=%d", none.Clients[last]),
		full.Work[last] < none.Work[last], map[string]any{"full": full.Work[last], "exponential": none.Work[last]},
		"%d calls against %d", full.Work[last], none.Work[last]))
	return cs
}

func jitterFindings(js jitterJSON) []string {
	var out []string
	for _, h := range js.Herd {
		out = append(out, fmt.Sprintf("Jitter: %d clients failing at once with %s put a peak of %d arrivals into %d spare per tick; %d arrivals re-failed, %d attempts in all, drained after %.1f s.",
			herdClients, kindPhrase(h.Jitter), h.Peak, herdSpare, h.Refail, h.Attempts, h.DrainSeconds))
	}
	for _, c := range js.Contention {
		last := len(c.Work) - 1
		out = append(out, fmt.Sprintf("Jitter: %d clients contending for one resource with %s made %s calls before all succeeded.", c.Clients[last], kindPhrase(c.Jitter), report.Int(int64(c.Work[last]))))
	}
	return out
}

// kindPhrase names a kind in a sentence: "fixed backoff", "full jitter".
func kindPhrase(kind string) string {
	switch kind {
	case "fixed", "exponential":
		return kind + " backoff"
	}
	return kind + " jitter"
}
