package live

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
)

// Knob is one control of a panel: a slider, a select or a switch. Values
// travel as strings, as an HTML form holds them.
type Knob struct {
	Key   string `json:"key"`
	Label string `json:"label"`
	// Kind is "range", "select" or "check".
	Kind    string   `json:"kind"`
	Min     float64  `json:"min"`
	Max     float64  `json:"max"`
	Step    float64  `json:"step"`
	Unit    string   `json:"unit,omitempty"`
	Options []string `json:"options,omitempty"`
	// Value is the setting in the experiment's default scenario.
	Value string `json:"value"`
	// Changes lists the fleets the knob changes, by index; Controls the
	// fleets it leaves alone, which lack the policy (use: none) and so
	// are its control. Both are empty for knobs of the origin or the
	// traffic, which every fleet shares. Indices, not names, because a
	// knob can rename a fleet ("budget 0.10").
	Changes  []int `json:"changes,omitempty"`
	Controls []int `json:"controls,omitempty"`
	// Control says what the control fleets have instead ("jitter:
	// none").
	Control string `json:"control,omitempty"`
	// Hint says in a few words what the knob does.
	Hint string `json:"hint,omitempty"`
}

// knob is a Knob's behaviour: where it applies in a scenario and how it
// changes one.
type knob struct {
	key, label, kind, unit, hint string
	options                      []string
	// rng gives the slider's range from the default scenario.
	rng func(def *scenario.Scenario) (lo, hi, step float64)
	// fleets picks the fleets the knob changes; nil for a knob of the
	// whole scenario.
	fleets func(f scenario.Fleet) bool
	// applies reports whether the knob means anything for the default
	// scenario; nil means it does when fleets picks at least one fleet.
	applies func(def *scenario.Scenario) bool
	// get reads the knob from the default scenario (from its first
	// fleet that the knob changes, for a fleet knob).
	get func(sc *scenario.Scenario, f *scenario.Fleet) string
	// set writes v into the scenario (into one fleet, for a fleet knob).
	set func(sc *scenario.Scenario, f *scenario.Fleet, v string) error
	// inert, when set, reports that the knob does nothing to sc
	// (drop_expired on an origin without a queue), so that the page can
	// grey it out.
	inert func(sc *scenario.Scenario) bool
	// control says what the fleets the knob leaves alone have instead.
	control string
}

// jitters are the jitters the page offers: those that need no setting of
// their own (factor jitter needs its factor).
var jitters = []string{"none", "full", "equal", "decorrelated"}

// adaptiveLimits are the limits the page offers the origin: the adaptive
// ones, with resil's defaults (a fixed limit needs its number).
var adaptiveLimits = []string{scenario.LimitAIMD, scenario.LimitGradient, scenario.LimitVegas}

// catalogue is every knob the page knows, in the order the page shows and
// applies them: the origin's model before the settings that depend on it.
var catalogue = []knob{
	{
		key: "rate", label: "intent rate", kind: "range", unit: "/s",
		hint: "intents per second, steady, before and after the trigger",
		rng: func(def *scenario.Scenario) (float64, float64, float64) {
			r := def.Traffic.Rate
			return math.Max(1, math.Round(r/5)), math.Round(2.5 * r), niceStep(r / 100)
		},
		applies: func(*scenario.Scenario) bool { return true },
		get:     func(sc *scenario.Scenario, _ *scenario.Fleet) string { return num(sc.Traffic.Rate) },
		set: func(sc *scenario.Scenario, _ *scenario.Fleet, v string) error {
			return setFloat(&sc.Traffic.Rate, v)
		},
	},
	{
		key: "model", label: "origin model", kind: "select", options: []string{scenario.ModelCapacity, scenario.ModelQueue},
		hint: "capacity rejects overload at once; queue holds it, and serves requests whose client gave up",
		applies: func(def *scenario.Scenario) bool {
			return def.Origin.Model == scenario.ModelCapacity || def.Origin.Model == scenario.ModelQueue
		},
		get: func(sc *scenario.Scenario, _ *scenario.Fleet) string { return sc.Origin.Model },
		set: func(sc *scenario.Scenario, _ *scenario.Fleet, v string) error {
			return setModel(&sc.Origin, v)
		},
	},
	{
		key: "capacity", label: "origin capacity", kind: "range", unit: "/s",
		hint: "attempts per second the origin serves",
		rng: func(def *scenario.Scenario) (float64, float64, float64) {
			c := def.Origin.Capacity
			return math.Max(1, math.Round(c/4)), math.Round(2.5 * c), niceStep(c / 100)
		},
		applies: func(def *scenario.Scenario) bool { return def.Origin.Capacity > 0 },
		get:     func(sc *scenario.Scenario, _ *scenario.Fleet) string { return num(sc.Origin.Capacity) },
		set: func(sc *scenario.Scenario, _ *scenario.Fleet, v string) error {
			return setFloat(&sc.Origin.Capacity, v)
		},
	},
	{
		key: "dip", label: "capacity during the dip", kind: "range", unit: "/s",
		hint: "how deep the trigger cuts the capacity",
		rng: func(def *scenario.Scenario) (float64, float64, float64) {
			c := def.Origin.Capacity
			return 0, math.Round(2.5 * c), niceStep(c / 100)
		},
		applies: func(def *scenario.Scenario) bool { return dipOf(def) != nil },
		get:     func(sc *scenario.Scenario, _ *scenario.Fleet) string { return num(dipOf(sc).Capacity) },
		set: func(sc *scenario.Scenario, _ *scenario.Fleet, v string) error {
			return setFloat(&dipOf(sc).Capacity, v)
		},
	},
	{
		key: "dip_for", label: "dip length", kind: "range", unit: "s",
		hint: "how long the trigger lasts",
		rng: func(def *scenario.Scenario) (float64, float64, float64) {
			d := dipOf(def)
			return 1, math.Min(60, (def.Duration - d.At).Seconds()), 1
		},
		applies: func(def *scenario.Scenario) bool { return dipOf(def) != nil },
		get:     func(sc *scenario.Scenario, _ *scenario.Fleet) string { return num(dipOf(sc).For.Seconds()) },
		set: func(sc *scenario.Scenario, _ *scenario.Fleet, v string) error {
			s, err := parseFloat(v)
			if err != nil {
				return err
			}
			dipOf(sc).For = time.Duration(math.Round(s*1000)) * time.Millisecond
			return nil
		},
	},
	{
		key: "drop_expired", label: "drop expired requests", kind: "check",
		hint: "the server fix: a queue that skips requests whose client already gave up",
		applies: func(def *scenario.Scenario) bool {
			return def.Origin.Model == scenario.ModelQueue || def.Origin.Model == scenario.ModelCapacity
		},
		get: func(sc *scenario.Scenario, _ *scenario.Fleet) string {
			return strconv.FormatBool(sc.Origin.DropExpired)
		},
		set: func(sc *scenario.Scenario, _ *scenario.Fleet, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("want true or false, got %q", v)
			}
			// Only a queue holds requests long enough to expire, and
			// only a queue origin has the setting.
			if sc.Origin.Model == scenario.ModelQueue {
				sc.Origin.DropExpired = b
			}
			return nil
		},
		inert: func(sc *scenario.Scenario) bool { return sc.Origin.Model != scenario.ModelQueue },
	},
	{
		key: "max_retries", label: "max retries", kind: "range", unit: "",
		hint:   "retries after the first attempt, per intent",
		rng:    func(*scenario.Scenario) (float64, float64, float64) { return 0, 10, 1 },
		fleets: func(f scenario.Fleet) bool { return f.Retry.MaxRetries > 0 },
		get:    func(_ *scenario.Scenario, f *scenario.Fleet) string { return strconv.Itoa(f.Retry.MaxRetries) },
		set: func(_ *scenario.Scenario, f *scenario.Fleet, v string) error {
			return setInt(&f.Retry.MaxRetries, v)
		},
		control: "no retries",
	},
	{
		key: "jitter", label: "jitter", kind: "select", options: jitters,
		hint: "how each client spreads its backoff delays",
		fleets: func(f scenario.Fleet) bool {
			return f.Retry.MaxRetries != 0 && f.Retry.Backoff.Jitter != "" && f.Retry.Backoff.Jitter != "none"
		},
		get: func(_ *scenario.Scenario, f *scenario.Fleet) string { return f.Retry.Backoff.Jitter },
		set: func(_ *scenario.Scenario, f *scenario.Fleet, v string) error {
			if !slices.Contains(jitters, v) {
				return fmt.Errorf("want none, full, equal or decorrelated, got %q", v)
			}
			f.Retry.Backoff.Jitter = v
			return nil
		},
		control: "jitter: none",
	},
	{
		key: "budget_ratio", label: "budget ratio", kind: "range", unit: "",
		hint:   "retries allowed per request: the budget's one decision",
		rng:    func(*scenario.Scenario) (float64, float64, float64) { return 0.01, 1, 0.01 },
		fleets: func(f scenario.Fleet) bool { return hasRatio(f.Budget.Use) },
		get:    func(_ *scenario.Scenario, f *scenario.Fleet) string { return num(f.Budget.Ratio()) },
		set: func(_ *scenario.Scenario, f *scenario.Fleet, v string) error {
			ratio := &f.Budget.TokenBucket.Ratio
			if f.Budget.Use == scenario.BudgetWindow {
				ratio = &f.Budget.Window.Ratio
			}
			old := *ratio
			if err := setFloat(ratio, v); err != nil {
				return err
			}
			// A fleet named after its ratio ("budget 0.10") keeps
			// telling the truth.
			f.Name = strings.Replace(f.Name, fmt.Sprintf("%.2f", old), fmt.Sprintf("%.2f", *ratio), 1)
			return nil
		},
		control: "budget: use: none",
	},
	{
		key: "budget_floor", label: "budget floor", kind: "range", unit: "tokens",
		hint: "min_tokens: retries the bucket allows with no success to fund them",
		rng: func(def *scenario.Scenario) (float64, float64, float64) {
			// The floor cannot pass the bucket's size.
			top := math.Inf(1)
			for _, f := range def.Fleets {
				if f.Budget.Use == scenario.BudgetTokenBucket {
					top = math.Min(top, f.Budget.TokenBucket.MaxTokens)
				}
			}
			return 0, top, 1
		},
		fleets: func(f scenario.Fleet) bool { return f.Budget.Use == scenario.BudgetTokenBucket },
		get:    func(_ *scenario.Scenario, f *scenario.Fleet) string { return num(f.Budget.TokenBucket.MinTokens) },
		set: func(_ *scenario.Scenario, f *scenario.Fleet, v string) error {
			return setFloat(&f.Budget.TokenBucket.MinTokens, v)
		},
		control: "budget: use: none",
	},
	{
		key: "breaker_threshold", label: "breaker threshold", kind: "range", unit: "failures",
		hint:   "failures in a row that open the breaker",
		rng:    func(*scenario.Scenario) (float64, float64, float64) { return 1, 30, 1 },
		fleets: func(f scenario.Fleet) bool { return f.Breaker.Use == scenario.BreakerConsecutive },
		get:    func(_ *scenario.Scenario, f *scenario.Fleet) string { return strconv.Itoa(f.Breaker.Threshold) },
		set: func(_ *scenario.Scenario, f *scenario.Fleet, v string) error {
			return setInt(&f.Breaker.Threshold, v)
		},
		control: "breaker: use: none",
	},
	{
		key: "limit", label: "origin's limit", kind: "select", options: adaptiveLimits,
		hint: "how the origin learns how many requests it may hold: from drops, or from latency",
		applies: func(def *scenario.Scenario) bool {
			return def.Origin.Limit.Use != "" && def.Origin.Limit.Use != scenario.LimitNone
		},
		get: func(sc *scenario.Scenario, _ *scenario.Fleet) string { return sc.Origin.Limit.Use },
		set: func(sc *scenario.Scenario, _ *scenario.Fleet, v string) error {
			if !slices.Contains(adaptiveLimits, v) {
				return fmt.Errorf("want %s, got %q", strings.Join(adaptiveLimits, ", "), v)
			}
			sc.Origin.Limit = scenario.DefaultLimit(v)
			return nil
		},
	},
	{
		key: "throttle_k", label: "throttle K", kind: "range", unit: "",
		hint:   "requests per accepted one before the adaptive throttle refuses: lower sheds sooner",
		rng:    func(*scenario.Scenario) (float64, float64, float64) { return 1, 4, 0.1 },
		fleets: func(f scenario.Fleet) bool { return f.Throttle.Use == scenario.ThrottleAdaptive },
		get:    func(_ *scenario.Scenario, f *scenario.Fleet) string { return num(f.Throttle.K) },
		set: func(_ *scenario.Scenario, f *scenario.Fleet, v string) error {
			return setFloat(&f.Throttle.K, v)
		},
		control: "throttle: use: none",
	},
}

// describe makes the Knob the page draws for the default scenario def, or
// reports false when the knob does not apply to it.
func (k *knob) describe(def *scenario.Scenario) (Knob, bool) {
	out := Knob{Key: k.key, Label: k.label, Kind: k.kind, Unit: k.unit, Options: k.options, Hint: k.hint, Control: k.control}
	var first *scenario.Fleet
	if k.fleets != nil {
		for i, f := range def.Fleets {
			if k.fleets(f) {
				out.Changes = append(out.Changes, i)
				if first == nil {
					first = &def.Fleets[i]
				}
			} else {
				out.Controls = append(out.Controls, i)
			}
		}
		if first == nil {
			return Knob{}, false
		}
	}
	if k.applies != nil && !k.applies(def) {
		return Knob{}, false
	}
	if k.rng != nil {
		out.Min, out.Max, out.Step = k.rng(def)
	}
	out.Value = k.get(def, first)
	return out, true
}

// apply sets the knob to v in sc, whose fleets are those of def in the
// same order.
func (k *knob) apply(def, sc *scenario.Scenario, v string) error {
	if k.fleets == nil {
		return k.set(sc, nil, v)
	}
	for i, f := range def.Fleets {
		if k.fleets(f) {
			if err := k.set(sc, &sc.Fleets[i], v); err != nil {
				return err
			}
		}
	}
	return nil
}

// setModel switches the origin's model, keeping what both models share
// and giving the new one's own settings their usual values: a queue of
// workers that each hold a request for 100 ms, or a capacity origin whose
// rejections are free.
func setModel(o *scenario.Origin, model string) error {
	if o.Model == model {
		return nil
	}
	n := scenario.Origin{
		Model: model, Capacity: o.Capacity, ErrorRate: o.ErrorRate, Broken: o.Broken, Replicas: max(o.Replicas, 1),
	}
	switch model {
	case scenario.ModelQueue:
		w := max(1, int(math.Round(o.Capacity/10)))
		n.Workers = max(n.Replicas, w-w%n.Replicas)
		n.Discipline = "fifo"
	case scenario.ModelCapacity:
		n.Latency = 10 * time.Millisecond
	default:
		return fmt.Errorf("the page offers the capacity and queue models, not %q", model)
	}
	*o = n
	return nil
}

// dipOf returns the scenario's first capacity trigger, or nil.
func dipOf(sc *scenario.Scenario) *scenario.Trigger {
	for i := range sc.Triggers {
		if sc.Triggers[i].Kind == scenario.TriggerCapacity {
			return &sc.Triggers[i]
		}
	}
	return nil
}

func hasRatio(use string) bool {
	return use == scenario.BudgetTokenBucket || use == scenario.BudgetWindow
}

func setFloat(p *float64, v string) error {
	x, err := parseFloat(v)
	if err != nil {
		return err
	}
	*p = x
	return nil
}

func setInt(p *int, v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("want a whole number, got %q", v)
	}
	*p = n
	return nil
}

func parseFloat(v string) (float64, error) {
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, fmt.Errorf("want a number, got %q", v)
	}
	return x, nil
}

// num writes a number as a form would: 100, 0.1, 12.5.
func num(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// niceStep rounds a step to 1, 2 or 5 times a power of ten, at least 1.
func niceStep(x float64) float64 {
	if x <= 1 {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= x {
			return m * mag
		}
	}
	return 10 * mag
}
