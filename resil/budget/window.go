package budget

import (
	"math"
	"sync"
	"time"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/internal/window"
)

// WindowSettings configures a [Window]. The zero value is invalid (Ratio
// and Funding have no default). A plain value: copying it is safe, though
// the copies share Retried. [WindowSettings.WithDefaults] fills in the
// defaults and [WindowSettings.Validate] checks the settings as NewWindow
// will.
type WindowSettings struct {
	// Ratio is the share of funding traffic in the window that may be
	// retried. Required: 0 < Ratio <= 1.
	Ratio float64
	// Funding chooses who pays: FundedBySuccess, FundedByRequest or
	// FundedByAnswer. Required.
	Funding Funding
	// MinRetriesPerSecond is the floor: retries allowed per second of TTL
	// whatever the traffic, so a client with little traffic can still
	// retry. Zero means no floor.
	MinRetriesPerSecond float64
	// TTL is how long a deposit or a retry counts. Zero means 10s.
	TTL time.Duration
	// RetryCost and TimeoutCost are what a retry after a failure or a
	// timeout counts for. Zero means 1, and TimeoutCost zero means
	// RetryCost. Tower ignores them: every retry counts 1.
	RetryCost, TimeoutCost float64
	// Retried lists the failed outcomes the caller retries: with
	// FundedByAnswer they deposit nothing. Ignored by other fundings.
	Retried []resil.Outcome
	// Tower gives the budget the arithmetic of tower's TpsBudget, which
	// Linkerd's ServiceProfile retry budget is (tower
	// tower/src/retry/budget/tps_budget.rs): the floor adds to the
	// ratio's allowance instead of standing under it; a Ratio of at most
	// 1 acts as 1/n with n = 1/Ratio truncated (0.4 acts as 0.5, 0.3 as
	// 1/3); the floor is MinRetriesPerSecond, truncated to whole retries,
	// times the TTL truncated to whole seconds, and the TTL must be in
	// [1s, 60s].
	Tower bool
}

// Window is the time-window form of the retry budget, as in Finagle,
// Envoy's retry budgets and Gateway API GEP-3388: over the last TTL,
// retries may be at most max(Ratio × deposits, MinRetriesPerSecond × TTL);
// with Tower (Linkerd's), Ratio × deposits + MinRetriesPerSecond × TTL.
// Unlike [TokenBucket] it forgets: a quiet period neither saves up retries
// nor leaves a debt, and the floor renews every TTL.
//
// Make one with [NewWindow]. A budget it did not make fails closed: the
// zero Window and a nil *Window grant no retry, count nothing and panic on
// nothing, and [resil.Policy.Validate] refuses them with
// [resil.ErrNotBuilt]. It is safe for concurrent use. The window moves
// with the now arguments, lazily: it reads no clock, and a now earlier
// than one already seen counts as that one.
type Window struct {
	mu      sync.Mutex
	ratio   fixed
	floor   fixed
	cost    fixed
	timeout fixed
	funding Funding
	tower   bool                             // the floor adds to the ratio's allowance
	retried [resil.OutcomeThrottled + 1]bool // by outcome: retried failures, which FundedByAnswer does not deposit for
	win     window.Sliding                   // deposits (count) and retries (fixed point)
}

const (
	winDeposits = 0
	winRetries  = 1
)

// NewWindow returns a window budget with the given settings, or an error
// naming the invalid field.
func NewWindow(s WindowSettings) (*Window, error) {
	s = s.WithDefaults()
	if err := s.validate(); err != nil {
		return nil, err
	}
	w := &Window{
		ratio:   toFixed(s.Ratio),
		floor:   toFixed(s.MinRetriesPerSecond * s.TTL.Seconds()),
		cost:    toFixed(s.RetryCost),
		timeout: toFixed(s.TimeoutCost),
		funding: s.Funding,
		tower:   s.Tower,
		win:     window.New(s.TTL),
	}
	for _, o := range s.Retried {
		w.retried[o] = true
	}
	if s.Tower {
		// In tower's units a deposit is worth 1 and a retry n = ⌊1/Ratio⌋
		// (Ratio is at most 1 here; tower's larger ratios are not taken):
		// the balance deposits − n × retries + floor × n must stay at
		// least n.
		n := math.Floor(1 / s.Ratio)
		w.ratio, w.cost, w.timeout = toFixed(1), toFixed(n), toFixed(n)
		w.floor = toFixed(math.Floor(s.MinRetriesPerSecond) * math.Floor(s.TTL.Seconds()) * n)
	}
	return w, nil
}

// WithDefaults returns s with the defaults in its zero fields: TTL 10s,
// RetryCost 1, TimeoutCost RetryCost.
func (s WindowSettings) WithDefaults() WindowSettings {
	def(&s.TTL, 10*time.Second)
	def(&s.RetryCost, 1)
	def(&s.TimeoutCost, s.RetryCost)
	return s
}

// Validate reports the first field of s that NewWindow would refuse (its
// zero fields taken as their defaults), as a [*resil.SettingError], or
// nil.
func (s WindowSettings) Validate() error { return s.WithDefaults().validate() }

func (s WindowSettings) validate() error {
	const p = "WindowSettings."
	if err := checkRatio(p+"Ratio", s.Ratio); err != nil {
		return err
	}
	if err := checkFunding(p+"Funding", s.Funding, FundedBySuccess, FundedByRequest, FundedByAnswer); err != nil {
		return err
	}
	if s.Tower && (s.TTL < time.Second || s.TTL > time.Minute) {
		return badSetting(p+"TTL", s.TTL, "must be in [1s, 1m] with Tower, as tower's TpsBudget asserts")
	}
	if s.TTL < time.Millisecond || s.TTL > 24*time.Hour {
		return badSetting(p+"TTL", s.TTL, "must be in [1ms, 24h]")
	}
	if !finite(s.MinRetriesPerSecond) || s.MinRetriesPerSecond < 0 || s.MinRetriesPerSecond > 1e6 {
		return badSetting(p+"MinRetriesPerSecond", s.MinRetriesPerSecond, "must be in [0, 1e6]")
	}
	if !finite(s.RetryCost) || s.RetryCost <= 0 || s.RetryCost > 1e6 {
		return badSetting(p+"RetryCost", s.RetryCost, "must be in (0, 1e6]")
	}
	if !finite(s.TimeoutCost) || s.TimeoutCost <= 0 || s.TimeoutCost > 1e6 {
		return badSetting(p+"TimeoutCost", s.TimeoutCost, "must be in (0, 1e6]")
	}
	for _, o := range s.Retried {
		if !o.Failed() {
			return badSetting(p+"Retried", o, "lists failures only: failure, timeout or throttled")
		}
	}
	return nil
}

// built reports whether NewWindow made w: it never leaves Funding unset.
func (w *Window) built() bool { return w != nil && w.funding != FundingUnset }

// Built names the constructor, and reports whether it made w.
func (w *Window) Built() (constructor string, ok bool) { return "budget.NewWindow", w.built() }

func (w *Window) deposit(now time.Time) {
	w.mu.Lock()
	w.win.Advance(now)
	w.win.Add(winDeposits, 1)
	w.mu.Unlock()
}

// allowance is what the window permits now. Called with mu held.
func (w *Window) allowance() fixed {
	if w.tower {
		return w.ratio*w.win.Sum[winDeposits] + w.floor
	}
	return max(w.ratio*w.win.Sum[winDeposits], w.floor)
}

// Begin deposits when the budget is funded by requests.
func (w *Window) Begin(now time.Time) {
	if w.built() && w.funding == FundedByRequest {
		w.deposit(now)
	}
}

// Record deposits for a success when the budget is funded by successes,
// and for a success or a failure not retried when it is funded by answers.
func (w *Window) Record(now time.Time, o resil.Outcome, paid float64) {
	if !w.built() {
		return
	}
	switch w.funding {
	case FundedBySuccess:
		if o == resil.OutcomeSuccess {
			w.deposit(now)
		}
	case FundedByAnswer:
		if o == resil.OutcomeSuccess || (o.Failed() && !w.retried[o]) {
			w.deposit(now)
		}
	}
}

// Withdraw allows the retry if the retries in the window, this one
// included, stay within the allowance.
func (w *Window) Withdraw(now time.Time, after resil.Outcome) (float64, bool) {
	if !w.built() {
		return 0, false
	}
	c := w.cost
	if after == resil.OutcomeTimeout {
		c = w.timeout
	}
	w.mu.Lock()
	w.win.Advance(now)
	ok := w.win.Sum[winRetries]+c <= w.allowance()
	if ok {
		w.win.Add(winRetries, c)
	}
	w.mu.Unlock()
	if !ok {
		return 0, false
	}
	return fromFixed(c), true
}

// Refund takes an abandoned retry out of the window again. A retry that
// has already left the window is not refunded twice.
func (w *Window) Refund(now time.Time, cost float64) {
	if c := toFixed(cost); c > 0 && w.built() {
		w.mu.Lock()
		w.win.Advance(now)
		w.win.Take(winRetries, c)
		w.mu.Unlock()
	}
}

// Tokens returns how many more unit-cost retries the window allows now
// (with Tower, in tower's units: a retry costs ⌊1/Ratio⌋).
func (w *Window) Tokens(now time.Time) float64 {
	if !w.built() {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.win.Advance(now)
	return math.Max(0, fromFixed(w.allowance()-w.win.Sum[winRetries]))
}

// RetryShare returns Ratio / RetryCost, or 0 for a budget NewWindow did
// not make.
func (w *Window) RetryShare() float64 {
	if !w.built() {
		return 0
	}
	return fromFixed(w.ratio) / fromFixed(w.cost)
}
