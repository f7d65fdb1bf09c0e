package balance

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/outlier"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type seed uint64

func (s seed) Uint64() uint64 { return uint64(s) }

// ejected returns a detector over n hosts with the given hosts ejected
// (by five 5xx each, max ejection 100%).
func ejected(t testing.TB, n int, hosts ...int) *outlier.Detector {
	s := outlier.EnvoyDefaults(n)
	s.MaxEjectionPercent = 100
	d, err := outlier.New(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		for k := 0; k < 5; k++ {
			d.Record(t0, h, outlier.Error5xx)
		}
	}
	return d
}

// TestRoundRobinTable: the healthy hosts in turn; in panic (Envoy's
// isHostSetInPanic: below 50% healthy, availability below 100) all hosts.
func TestRoundRobinTable(t *testing.T) {
	tests := []struct {
		name    string
		n       int
		out     []int
		panic   int
		want    []int
		wantErr error
	}{
		{"none ejected", 3, nil, 0, []int{0, 1, 2, 0, 1, 2}, nil},
		{"host 1 ejected: 0 and 2 in turn, no double share", 4, []int{1}, 0, []int{0, 2, 3, 0, 2, 3}, nil},
		{"2 of 4 healthy: 50% is not below 50%", 4, []int{0, 1}, 0, []int{2, 3, 2, 3}, nil},
		{"1 of 4 healthy: panic, all hosts", 4, []int{0, 1, 2}, 0, []int{0, 1, 2, 3, 0}, nil},
		{"1 of 4 healthy, NoPanic", 4, []int{0, 1, 2}, NoPanic, []int{3, 3, 3}, nil},
		{"all ejected, NoPanic", 2, []int{0, 1}, NoPanic, nil, ErrNoHost},
		{"3 of 4 healthy at threshold 80: availability 100, no panic", 4, []int{0}, 80, []int{1, 2, 3, 1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewRoundRobin(Settings{Hosts: tt.n, Detector: ejected(t, tt.n, tt.out...), PanicThreshold: tt.panic})
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != nil {
				if _, err := p.Pick(t0); !errors.Is(err, tt.wantErr) {
					t.Fatalf("Pick: %v, want %v", err, tt.wantErr)
				}
				return
			}
			for k, w := range tt.want {
				h, err := p.Pick(t0)
				if err != nil || h != w {
					t.Fatalf("pick %d: %d, %v; want %d", k, h, err, w)
				}
				p.Done(t0, h, 0, resil.OutcomeSuccess)
			}
		})
	}
}

// TestLoadPickersTable: P2C takes the draw with strictly fewer in flight
// (Envoy's least_request: "if candidate is null or active(sampled) <
// active(candidate)"); LeastRequest the minimum over all hosts; neither
// picks an ejected host.
func TestLoadPickersTable(t *testing.T) {
	for _, mk := range []struct {
		name string
		new  func(Settings) (Picker, error)
	}{
		{"p2c", func(s Settings) (Picker, error) { return NewP2C(s) }},
		{"least", func(s Settings) (Picker, error) { return NewLeastRequest(s) }},
		{"ewma", func(s Settings) (Picker, error) { return NewPeakEWMA(s) }},
		{"random", func(s Settings) (Picker, error) { return NewRandom(s) }},
	} {
		t.Run(mk.name, func(t *testing.T) {
			p, err := mk.new(Settings{Hosts: 5, Detector: ejected(t, 5, 3), Rand: seed(7)})
			if err != nil {
				t.Fatal(err)
			}
			counts := make([]int, 5)
			for k := 0; k < 4000; k++ {
				h, err := p.Pick(t0)
				if err != nil {
					t.Fatal(err)
				}
				counts[h]++
				if k%2 == 0 {
					p.Done(t0, h, time.Millisecond, resil.OutcomeSuccess)
				}
			}
			if counts[3] != 0 {
				t.Errorf("ejected host 3 picked %d times", counts[3])
			}
			for _, h := range []int{0, 1, 2, 4} {
				if counts[h] < 500 {
					t.Errorf("host %d picked %d of 4000 times: %v", h, counts[h], counts)
				}
			}
		})
	}
	// LeastRequest always takes a minimum.
	p, _ := NewLeastRequest(Settings{Hosts: 3, Rand: seed(1)})
	p.slots[0].inflight.Store(3)
	p.slots[1].inflight.Store(1)
	p.slots[2].inflight.Store(2)
	if h, _ := p.Pick(t0); h != 1 {
		t.Errorf("LeastRequest picked %d, want 1", h)
	}
	// P2C never takes the busier of two distinct draws.
	q, _ := NewP2C(Settings{Hosts: 2, Rand: seed(3)})
	q.slots[0].inflight.Store(100)
	for k := 0; k < 100; k++ {
		q.Pick(t0) // host 0 only when both draws are host 0, or host 1 is as busy
	}
	if q.slots[1].inflight.Load() < 60 {
		t.Errorf("P2C sent %d of 100 to the idle host", q.slots[1].inflight.Load())
	}
}

// TestPeakEWMARule: linkerd/ewma/src/lib.rs at 29637b64: get_at projects
// value × exp(−elapsed/decay); add_peak replaces the value when the
// projection is below the sample, else add: value × (1−α) + sample × α,
// α = 1 − exp(−elapsed/decay); a sample not later than the stored one is
// dropped. Decay 10s.
func TestPeakEWMARule(t *testing.T) {
	sec := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	e1 := math.Exp(-1)
	tests := []struct {
		name  string
		done  [][2]float64 // (at s, latency ms)
		at    float64
		wantS float64 // the estimate in ms at at
	}{
		{"default RTT before any answer", nil, 0, 30},
		{"first sample taken as is", [][2]float64{{1, 100}}, 1, 100},
		{"decays toward zero: one decay later × e^-1", [][2]float64{{1, 100}}, 11, 100 * e1},
		{"a peak replaces", [][2]float64{{1, 100}, {2, 500}}, 2, 500},
		{"a lower sample moves by 1 − e^-1 after a decay", [][2]float64{{1, 100}, {11, 10}}, 11, 0},
		{"a sample at the same time, lower, is dropped", [][2]float64{{1, 100}, {1, 10}}, 1, 100},
	}
	// Row 5 by the rule: projection 100e^-1 = 36.8 > 10, so add:
	// 100 × e^-1 + 10 × (1 − e^-1).
	tests[4].wantS = 100*e1 + 10*(1-e1)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPeakEWMA(Settings{Hosts: 1, Rand: seed(1)})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range tt.done {
				p.slots[0].inflight.Add(1)
				p.Done(sec(d[0]), 0, ms(d[1]), resil.OutcomeSuccess)
			}
			got := float64(p.Estimate(sec(tt.at), 0)) / float64(time.Millisecond)
			if math.Abs(got-tt.wantS) > 1e-3 {
				t.Errorf("estimate %.4fms, want %.4fms", got, tt.wantS)
			}
		})
	}
	// The cost counts requests in flight: a fast host with many in flight
	// loses to a slow idle one.
	p, _ := NewPeakEWMA(Settings{Hosts: 2, Rand: seed(5)})
	p.Done(t0, 0, 10*time.Millisecond, resil.OutcomeSuccess)
	p.Done(t0, 1, 40*time.Millisecond, resil.OutcomeSuccess)
	p.slots[0].inflight.Store(9)
	if c0, c1 := p.cost(t0, 0), p.cost(t0, 1); !(c0 > c1) {
		t.Errorf("costs %v, %v: want the busy fast host dearer", c0, c1)
	}
}

func TestSettingsErrors(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		field string
	}{
		{"zero", second(NewRoundRobin(Settings{})), "balance.Settings.Hosts"},
		{"rand on rr", second(NewRoundRobin(Settings{Hosts: 2, Rand: seed(1)})), "balance.Settings.Rand"},
		{"panic", second(NewP2C(Settings{Hosts: 2, PanicThreshold: 101})), "balance.Settings.PanicThreshold"},
		{"detector size", second(NewRandom(Settings{Hosts: 2, Detector: ejected(t, 3)})), "balance.Settings.Detector"},
		{"zero detector", second(NewRandom(Settings{Hosts: 2, Detector: &outlier.Detector{}})), "balance.Settings.Detector"},
		{"decay", second(NewPeakEWMA(Settings{Hosts: 2, Decay: -1})), "balance.Settings.Decay"},
	}
	for _, tt := range tests {
		var se *resil.SettingError
		if !errors.As(tt.err, &se) || se.Field != tt.field {
			t.Errorf("%s: %v, want an error naming %s", tt.name, tt.err, tt.field)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestZeroPickersFailClosed(t *testing.T) {
	for _, p := range []Picker{&RoundRobin{}, &Random{}, &P2C{}, &LeastRequest{}, &PeakEWMA{}} {
		if _, err := p.Pick(t0); !errors.Is(err, resil.ErrNotBuilt) {
			t.Errorf("%T: Pick: %v", p, err)
		}
		p.Done(t0, 0, time.Second, resil.OutcomeSuccess) // no panic
	}
}

func TestPickDoneAllocatesNothing(t *testing.T) {
	d := ejected(t, 8, 2)
	for _, p := range pickers(t, Settings{Hosts: 8, Detector: d}) {
		if a := testing.AllocsPerRun(1000, func() {
			h, _ := p.Pick(t0)
			p.Done(t0, h, time.Millisecond, resil.OutcomeSuccess)
		}); a != 0 {
			t.Errorf("%T: %v allocations per pick and release", p, a)
		}
	}
}

// pickers returns one of each picker for s.
func pickers(t testing.TB, s Settings) []Picker {
	rr, err := NewRoundRobin(s)
	if err != nil {
		t.Fatal(err)
	}
	s.Rand = seed(42)
	r, _ := NewRandom(s)
	p, _ := NewP2C(s)
	l, _ := NewLeastRequest(s)
	e, _ := NewPeakEWMA(s)
	return []Picker{rr, r, p, l, e}
}

// TestNew: each Kind makes its picker; an unknown kind is ErrUnknownKind,
// and a constructor's error comes back as a nil Picker, not a typed nil.
func TestNew(t *testing.T) {
	for _, c := range []struct {
		kind Kind
		s    Settings
		want string // the picker's type, or "" for an error
		err  error
	}{
		{KindRoundRobin, Settings{Hosts: 3}, "*balance.RoundRobin", nil},
		{KindRandom, Settings{Hosts: 3}, "*balance.Random", nil},
		{KindP2C, Settings{Hosts: 3}, "*balance.P2C", nil},
		{KindLeastRequest, Settings{Hosts: 3}, "*balance.LeastRequest", nil},
		{KindPeakEWMA, Settings{Hosts: 3}, "*balance.PeakEWMA", nil},
		{"ewma", Settings{Hosts: 3}, "", ErrUnknownKind},
		{KindP2C, Settings{}, "", nil}, // Hosts is required
	} {
		p, err := New(c.kind, c.s)
		if c.want == "" {
			if err == nil || p != nil {
				t.Errorf("New(%q, %+v) = %v, %v: want a nil picker and an error", c.kind, c.s, p, err)
			}
			if c.err != nil && !errors.Is(err, c.err) {
				t.Errorf("New(%q): %v, want %v", c.kind, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("New(%q): %v", c.kind, err)
		}
		if got := fmt.Sprintf("%T", p); got != c.want {
			t.Errorf("New(%q) is a %s, want %s", c.kind, got, c.want)
		}
		if h, err := p.Pick(time.Unix(0, 0)); err != nil || h < 0 || h >= 3 {
			t.Errorf("New(%q).Pick = %d, %v", c.kind, h, err)
		}
	}
}
