package lab

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil/resilhttp"
	"github.com/retrystorm/retrystorm/scenario"
)

// target is a server that records when each request arrived and answers
// after hold (or when its client leaves).
type target struct {
	mu       sync.Mutex
	arrivals []time.Time
	methods  map[string]int
	keys     int
	hold     time.Duration
}

func (tg *target) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == healthPath {
		return
	}
	tg.mu.Lock()
	tg.arrivals = append(tg.arrivals, time.Now())
	if tg.methods == nil {
		tg.methods = map[string]int{}
	}
	tg.methods[r.Method]++
	if r.Header.Get(resilhttp.DefaultKeyHeader) != "" {
		tg.keys++
	}
	tg.mu.Unlock()
	select {
	case <-time.After(tg.hold):
	case <-r.Context().Done():
	}
}

func runLoad(t *testing.T, tg *target, cfg LoadConfig) LoadStats {
	t.Helper()
	u, err := url.Parse(startServer(t, tg))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Target = u
	if cfg.Deadline == 0 {
		cfg.Deadline = 2 * time.Second
	}
	if cfg.Start.IsZero() {
		cfg.Start = time.Now().Add(20 * time.Millisecond)
	}
	st, err := RunLoad(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestLoadIsOpenLoop: intents start on schedule however slowly the target
// answers; none waits for another (no coordinated omission).
func TestLoadIsOpenLoop(t *testing.T) {
	tg := &target{hold: 400 * time.Millisecond}
	start := time.Now().Add(20 * time.Millisecond)
	st := runLoad(t, tg, LoadConfig{
		Traffic: scenario.Traffic{Rate: 200, Arrivals: "constant", Clients: 1, Idempotent: 1},
		Start:   start, Duration: 300 * time.Millisecond,
	})
	if st.Due != 60 || st.Sent != 60 || st.Succeeded != 60 {
		t.Errorf("due %d, sent %d, succeeded %d; want 60 of each", st.Due, st.Sent, st.Succeeded)
	}
	tg.mu.Lock()
	defer tg.mu.Unlock()
	last := tg.arrivals[len(tg.arrivals)-1].Sub(start)
	// Waiting for answers would take 60 × 400 ms; sending on schedule
	// ends at 295 ms.
	limit := 400 * time.Millisecond
	if slow() {
		limit = 800 * time.Millisecond
	}
	if last > limit {
		t.Errorf("the last intent arrived %v after the start; the schedule ends at 295ms: the generator waited for answers", last)
	}
	if !slow() && st.LateMax > 0.1 {
		t.Errorf("intents were sent up to %.0f ms late", 1000*st.LateMax)
	}
}

func TestLoadRates(t *testing.T) {
	for _, tc := range []struct {
		name     string
		traffic  scenario.Traffic
		triggers []scenario.Trigger
		want     float64
		spread   float64
		tick     time.Duration
	}{
		{"constant", scenario.Traffic{Rate: 1000, Arrivals: "constant"}, nil, 500, 1, 0},
		// Poisson: four standard deviations.
		{"poisson", scenario.Traffic{Rate: 1000, Arrivals: "poisson"}, nil, 500, 4 * math.Sqrt(500), 0},
		{"load trigger", scenario.Traffic{Rate: 400, Arrivals: "constant"},
			[]scenario.Trigger{{Kind: scenario.TriggerLoad, At: 250 * time.Millisecond, For: time.Second, Rate: 1200}}, 100 + 300, 2, 0},
		// A series from 1000 to 0 per second: ticks of 100 ms at 1000,
		// 750, 500, 250 and 0, with the phase kept from tick to tick.
		{"rate series", scenario.Traffic{Rate: 1000, Arrivals: "constant", Series: &scenario.Series{Scale: 1,
			Points: []scenario.Point{{At: 0, Rate: 1000}, {At: 400 * time.Millisecond, Rate: 0}}}}, nil, 250, 1, 100 * time.Millisecond},
	} {
		tc.traffic.Clients, tc.traffic.Idempotent = 1, 1
		st := runLoad(t, &target{}, LoadConfig{Traffic: tc.traffic, Triggers: tc.triggers, Duration: 500 * time.Millisecond, Seed: 7, Tick: tc.tick})
		if math.Abs(float64(st.Due)-tc.want) > tc.spread || st.Sent != st.Due {
			t.Errorf("%s: %d due, %d sent; want %g ± %g", tc.name, st.Due, st.Sent, tc.want, tc.spread)
		}
	}
}

func TestLoadShedsWhenTooManyAreOut(t *testing.T) {
	tally := NewTally(time.Now(), time.Second, 2)
	st := runLoad(t, &target{hold: time.Second}, LoadConfig{
		Traffic:  scenario.Traffic{Rate: 100, Arrivals: "constant", Clients: 1, Idempotent: 1},
		Duration: 200 * time.Millisecond, Deadline: 300 * time.Millisecond, MaxInFlight: 5, Tally: tally,
	})
	if st.Due != 20 || st.Sent != 5 || st.Shed != 15 || st.Lost != 20 {
		t.Errorf("due %d, sent %d, shed %d, lost %d; want 20, 5, 15, 20", st.Due, st.Sent, st.Shed, st.Lost)
	}
	if l := tally.lostBy(); l.Unfinished != 15 || l.Deadline != 5 {
		t.Errorf("lost by %+v, want 15 unfinished (shed) and 5 past their deadline", l)
	}
}

func TestLoadSendsPOSTsWithKeys(t *testing.T) {
	tg := &target{}
	runLoad(t, tg, LoadConfig{
		Traffic:  scenario.Traffic{Rate: 2000, Arrivals: "constant", Clients: 4, Idempotent: 0.5, Keys: 1},
		Duration: 200 * time.Millisecond, Seed: 3,
	})
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if p := tg.methods["POST"]; p < 150 || p > 250 || tg.keys != p {
		t.Errorf("%d POSTs (%d with a key) of 400, want about half, all with a key", p, tg.keys)
	}
}

func TestRunLoadNeedsATargetAndADeadline(t *testing.T) {
	if _, err := RunLoad(context.Background(), LoadConfig{}); err == nil {
		t.Error("RunLoad without a target")
	}
}

// TestIntentDeadlineCoversEveryChain: for every jitter, the load
// generator's bound on an intent is at least twice the longest retry chain
// the policy draws (every attempt timing out, then every backoff), over
// many draws: no intent is cut short by the generator when the machine
// keeps time.
func TestIntentDeadlineCoversEveryChain(t *testing.T) {
	for _, jitter := range []string{"none", "full", "equal", "decorrelated", "factor"} {
		f := scenario.Fleet{Name: jitter, Timeout: 300 * time.Millisecond,
			Retry:  scenario.Retry{MaxRetries: 4, Backoff: scenario.Backoff{Use: "exponential", Base: 100 * time.Millisecond, Cap: 2 * time.Second, Multiplier: 2, Jitter: jitter}},
			Budget: scenario.Budget{Use: scenario.BudgetNone}}
		if jitter == "factor" {
			f.Retry.Backoff.Factor = 0.5
		}
		bound := intentDeadline(f)
		p, err := f.NewPolicy()
		if err != nil {
			t.Fatal(err)
		}
		src := rand.NewPCG(1, 2)
		longest := time.Duration(0)
		for range 10000 {
			chain := time.Duration(f.Retry.MaxRetries+1) * f.Timeout
			var prev time.Duration
			for r := 1; r <= f.Retry.MaxRetries; r++ {
				prev = p.Backoff.Delay(r, prev, src)
				chain += prev
			}
			longest = max(longest, chain)
		}
		if 2*longest > bound {
			t.Errorf("%s: bound %v for a longest chain of %v drawn: want at least twice it", jitter, bound, longest)
		}
	}
}
