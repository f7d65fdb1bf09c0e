package verdict

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/retrystorm/retrystorm/giveup"

	"github.com/retrystorm/retrystorm/experiment"

	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
)

// SettingAt is one setting of a layer and where the user wrote it: the
// file and line a CI annotation points at. Line 0: the file is known,
// the line is not.
type SettingAt struct {
	Name string `json:"setting"` // "retry.max_retries", "budget.budget_percent"...
	File string `json:"file"`
	Line int    `json:"line"`
}

// StackLayer is one layer of a call chain: the policy it calls the next
// layer (or the origin) with, and where it came from.
type StackLayer struct {
	Name string // the layer's name: its service, or its file
	File string // the file it was read from
	Line int    // where in File the layer is (a route, a ConfigMap's value); 0: the whole file
	// Via says how the layer above leads to this one, where manifests
	// name it ("frontend.yaml:24: env PAYMENTS_ADDR"); empty for a stack
	// of files, whose order the user gives.
	Via   string
	Input CheckInput // its policy (Tiers unused)
	// Settings are its settings with their file and line, for blame.
	Settings []SettingAt
	// Instances is how many instances the layer has (a Deployment's
	// replicas), each with its own budget and breaker; zero: one per
	// client instance of the check.
	Instances int
}

// StackLayerResult is one layer of a checked stack.
type StackLayerResult struct {
	Name       string `json:"name"`
	File       string `json:"file"`
	Line       int    `json:"line,omitempty"`      // where in File the layer is, when known
	Via        string `json:"via,omitempty"`       // how the layer above leads here (manifests)
	Instances  int    `json:"instances,omitempty"` // the layer's instances (replicas); 0: one per client
	Origin     string `json:"origin"`
	MaxRetries int    `json:"max_retries"` // -1: unlimited (a budget bounds them)
	// ClosedForm is the attempts per intent that leave this layer when
	// everything below fails: the product, over this layer and those
	// above, of (1 + max_retries) where the layer retries the failure it
	// sees (a refused connection at the innermost, an error answer from a
	// tier above it), else 1. Zero: unbounded by retry counts.
	ClosedForm float64 `json:"closed_form"`
	// Exact is whether the closed form is what the policies send (no
	// budget, breaker, hedging or idempotent-only rule cuts it), rather
	// than a bound.
	Exact bool `json:"exact"`
	// Simulated is the attempts per intent that left this layer in the
	// simulated total outage.
	Simulated float64 `json:"simulated"`
	// Blame lists the settings of this layer's file that can keep a storm
	// going, with their file and line, when the chain is unsafe.
	Blame []Blame `json:"blame,omitempty"`
}

// Blame is one setting to blame: why, and where the user wrote it.
type Blame struct {
	Layer   string `json:"layer"`
	Setting string `json:"setting"`
	File    string `json:"file"`
	Line    int    `json:"line"`
	Why     string `json:"why"`
}

// StackResult is a checked stack: the amplification per layer in a total
// outage (closed form and simulated), and check's verdict on the whole
// chain, judged at the origin.
type StackResult struct {
	Chain  string             `json:"chain"` // "app.ini → mesh.yaml → gateway.yaml"
	Layers []StackLayerResult `json:"layers"`
	// Agree is whether the simulated amplification at the origin is
	// within 5% of the closed form, when every layer's is exact; else
	// whether it is no more than the bound.
	Agree bool         `json:"closed_form_agrees"`
	Check *CheckResult `json:"check"`
	Level Level        `json:"verdict"`
	// Outage, in a shard's part, says that this shard made the outage
	// run (the layers' simulated amplification); merged results omit it.
	Outage bool `json:"outage_run,omitempty"`
}

// stackAmpError is how far the simulated amplification in a total outage
// may be from the closed form: within 5%, as the layers experiment
// measures it.
const stackAmpError = 0.05

// tierServer is the server model of a stack's tier: a millisecond of its
// own work and no queue, as the layers scenario's, so that the origin is
// the bottleneck and each tier holds its place while its call is out.
var tierServer = scenario.Origin{Model: scenario.ModelConcurrency, Base: time.Millisecond}

// stackTiers turns layers 1..n-1 into tiers below layer 0's fleet.
func stackTiers(layers []StackLayer) []scenario.Tier {
	var ts []scenario.Tier
	for _, l := range layers[1:] {
		f := l.Input.Fleet
		srv := tierServer
		srv.Replicas = min(l.Instances, maxTierReplicas)
		ts = append(ts, scenario.Tier{Name: simName(l.Name), Server: srv,
			Client: f.Client()})
	}
	return ts
}

// chainOf is the layers as their give-up answers see them, outermost
// first: what each answers the one above when it gives up.
func chainOf(layers []StackLayer) []giveup.Layer {
	chain := make([]giveup.Layer, len(layers))
	for i, l := range layers {
		f := l.Input.Fleet
		chain[i] = giveup.Layer{Product: giveup.Product(f.Product), GRPC: f.GRPC(), Inbound: giveup.Product(f.Inbound.Product)}
	}
	return chain
}

// perClient gives each tier one replica per client instance: each
// instance of the layer above calls through its own copy of the layer
// below (a sidecar per pod), with its own budget and breaker, so floors
// per instance (Envoy's min_retry_concurrency, Linkerd's
// minRetriesPerSecond) add up as they do in check's fleets. A layer with
// fewer instances (a gateway's few pods) is over-counted: manifests with
// replicas would say; a stack of files cannot.
func perClient(tiers []scenario.Tier, clients int) []scenario.Tier {
	out := make([]scenario.Tier, len(tiers))
	copy(out, tiers)
	for i := range out {
		if out[i].Server.Replicas == 0 { // unknown: one per client instance
			out[i].Server.Replicas = min(max(clients, 1), maxTierReplicas)
		}
	}
	return out
}

// maxTierReplicas is the most replicas a scenario's tier takes.
const maxTierReplicas = 10_000

// CheckStack checks layers as one call chain, outermost first: layer 0 is
// the fleet, each next layer a tier it calls through, the last calling
// the origin. It runs the chain through check's envelope (judged at the
// origin) and through a total outage that measures the amplification
// at each layer against the closed form.
//
// With co.Shard set, it runs only the shard's cells of the envelope, and
// the outage run only if outage is true (one shard runs it): the result
// is a part for [MergeStack], with no verdict yet.
func CheckStack(ctx context.Context, layers []StackLayer, co CheckOptions, opts experiment.Options) (*StackResult, error) {
	return CheckStackShard(ctx, layers, co, opts, true)
}

// CheckStackShard is [CheckStack] for one shard: outage says whether this
// shard makes the outage run (without a shard it is always made).
func CheckStackShard(ctx context.Context, layers []StackLayer, co CheckOptions, opts experiment.Options, outage bool) (*StackResult, error) {
	if len(layers) < 2 {
		return nil, errors.New("check --stack: a stack is two layers or more")
	}
	if len(layers) > scenario.MaxTiers+1 {
		return nil, fmt.Errorf("check --stack: %d layers: at most %d (a chain of nine layers retrying three times each sends 262,144 attempts per intent)", len(layers), scenario.MaxTiers+1)
	}
	sharded := co.Shard.Count > 1
	outage = outage || !sharded
	var names []string
	for _, l := range layers {
		names = append(names, l.Name)
	}
	r := &StackResult{Chain: strings.Join(names, " → ")}
	in := StackInput(layers)
	fleet, tiers := in.Fleet, in.Tiers
	c, err := Check(ctx, []CheckInput{in}, co, opts)
	if err != nil {
		return nil, err
	}
	r.Check = c

	var sims []float64
	if outage {
		if sims, err = stackOutage(ctx, co.Base, fleet, tiers, c.Clients[0], opts); err != nil {
			return nil, err
		}
		r.Outage = sharded
	}
	counted := co.Base.Clone()
	counted.Traffic.Clients = c.Clients[0] // floors per client at the verdict's count
	closed, exact := 1.0, true
	var blamed []string
	seen := giveup.Seen(chainOf(layers), giveup.Refused)
	for i, l := range layers {
		f := l.Input.Fleet
		lr := StackLayerResult{Name: l.Name, File: l.File, Line: l.Line, Via: l.Via, Instances: l.Instances, Origin: l.Input.Origin, MaxRetries: f.Retry.MaxRetries}
		if sims != nil {
			lr.Simulated = round3(sims[i])
		}
		switch {
		case f.Retry.MaxRetries < 0:
			closed = 0
		case closed > 0 && f.Retry.Retries(seen[i]):
			closed *= float64(1 + f.Retry.MaxRetries)
		}
		if i == len(layers)-1 && closed > 0 && f.Inbound.Retries > 0 {
			// The server sidecar retries the refusal on the same pod.
			closed *= float64(1 + f.Inbound.Retries)
		}
		exact = exact && closed > 0 && layerExact(f)
		lr.ClosedForm, lr.Exact = round3(closed), exact
		for _, why := range risks(f, counted, l.Input.FromBase) {
			b := blameFor(l, why)
			lr.Blame = append(lr.Blame, b)
			blamed = append(blamed, l.Name+": "+why)
		}
		r.Layers = append(r.Layers, lr)
	}
	c.Fleets[0].Risks = blamed
	if sharded {
		return r, nil // the verdict and the claim wait for MergeStack
	}
	r.finish()
	return r, nil
}

// StackInput is the chain of layers as check runs it: layer 0's fleet,
// named after the chain, calling the origin through the others as tiers.
func StackInput(layers []StackLayer) CheckInput {
	var names, files []string
	for _, l := range layers {
		names, files = append(names, l.Name), append(files, l.File)
	}
	fleet := layers[0].Input.Fleet
	fleet.Name = simName(strings.Join(names, " → "))
	return CheckInput{Fleet: fleet, Origin: strings.Join(files, ", "), Tiers: stackTiers(layers)}
}

// finish makes the verdict of a stack whose check has every cell and
// whose layers have the outage run's amplification: unsafe or not, and
// the claim that the closed form agrees.
func (r *StackResult) finish() {
	c := r.Check
	r.Level = c.Level(0)
	last := r.Layers[len(r.Layers)-1]
	switch {
	case last.Exact:
		r.Agree = math.Abs(last.Simulated-last.ClosedForm) <= stackAmpError*last.ClosedForm
	case last.ClosedForm > 0:
		r.Agree = last.Simulated <= last.ClosedForm*(1+stackAmpError)
	default:
		r.Agree = true // no bound to compare with
	}
	c.Claims = append(c.Claims, report.Check(fmt.Sprintf("the simulated amplification at the origin in a total outage agrees with the closed form through the %d layers", len(r.Layers)),
		r.Agree, map[string]any{"closed_form": last.ClosedForm, "exact": last.Exact, "simulated": last.Simulated},
		"simulated %.3f attempts per intent, closed form %.3f (%s)", last.Simulated, last.ClosedForm, map[bool]string{true: "exact", false: "a bound"}[last.Exact]))
}

// maxSimName is the longest name a scenario's fleet or tier takes.
const maxSimName = 100

// simName is a chain's or a layer's name as the simulator takes it: a
// chain of many layers found in manifests ("VirtualService shop-edge →
// ConfigMap frontend-grpc of Deployment frontend → ...") is longer than
// a fleet's name may be, so its middle is cut. The result keeps the
// whole name.
func simName(s string) string {
	if len(s) <= maxSimName {
		return s
	}
	const cut = " … "
	head, tail := s[:(maxSimName-len(cut))/2], s[len(s)-(maxSimName-len(cut))/2:]
	for !utf8.ValidString(head) {
		head = head[:len(head)-1]
	}
	for !utf8.ValidString(tail) {
		tail = tail[1:]
	}
	return head + cut + tail
}

// layerExact reports whether a layer sends exactly its retry count's
// attempts when everything fails: nothing else (a budget, a breaker,
// hedges, an idempotent-only rule) cuts or adds to them.
func layerExact(f scenario.Fleet) bool {
	noBudget := f.Budget.Use == scenario.BudgetNone || f.Budget.Use == ""
	noBreaker := f.Breaker.Use == scenario.BreakerNone || f.Breaker.Use == ""
	return noBudget && noBreaker && f.Hedge.Delay == 0 && !f.Retry.IdempotentOnly
}

// riskSettings maps a risk (risks' words) to the settings it is about,
// most telling first: the setting a blame points at.
func riskSettings(why string) []string {
	switch {
	case strings.HasPrefix(why, "unlimited retries"), strings.HasPrefix(why, "max_retries"):
		return []string{"retry.max_retries", "budget"}
	case strings.HasPrefix(why, "at most"), strings.HasPrefix(why, "a concurrency budget"),
		strings.HasPrefix(why, "a budget"), strings.HasPrefix(why, "the AWS retry quota"):
		return []string{"budget", "retry.max_retries"}
	case strings.HasPrefix(why, "backoff"), strings.HasPrefix(why, "no backoff"):
		return []string{"retry.backoff"}
	case strings.HasPrefix(why, "timeout"):
		return []string{"timeout"}
	case strings.HasPrefix(why, "no circuit breaker"):
		return []string{"breaker"}
	}
	return nil
}

// blameFor is the setting of layer l a risk points at, with its file and
// line: the first of the risk's settings the user's file sets, else the
// layer's file (a setting the file leaves out, such as a breaker).
func blameFor(l StackLayer, why string) Blame {
	b := Blame{Layer: l.Name, File: l.File, Why: why}
	for _, key := range riskSettings(why) {
		for _, s := range l.Settings {
			if s.File != "" && (s.Name == key || strings.HasPrefix(s.Name, key+".")) {
				b.Setting, b.File, b.Line = s.Name, s.File, s.Line
				return b
			}
		}
		if b.Setting == "" {
			b.Setting = key
		}
	}
	return b
}

// stackOutage runs the chain in a total outage of the origin (connections
// refused) and returns the attempts per intent that left each layer. Each
// layer's timeout is stretched past what the layers below can take and
// deadlines are lifted, so that no layer gives up before the one below
// has made every retry it may: the worst case the retry counts allow.
func stackOutage(ctx context.Context, base *scenario.Scenario, fleet scenario.Fleet, tiers []scenario.Tier, clients int, opts experiment.Options) ([]float64, error) {
	sc := base.Clone()
	sc.Tiers = perClient(tiers, clients)
	// below is how long the layers under layer l may take, at most.
	below := time.Duration(0)
	stretch := func(timeout time.Duration, r scenario.Retry) time.Duration {
		n := max(r.MaxRetries, 0)
		if r.MaxRetries < 0 {
			n = 10 // a budget bounds them; the run is bounded below anyway
		}
		cap := r.Backoff.Cap
		if cap <= 0 {
			cap = r.Backoff.Base
		}
		// An hour bounds it: a chain that needs longer has retries no
		// outage run measures, and the scenario takes no longer timeout
		// than a day.
		t := min(max(timeout, below+time.Second), time.Hour)
		below = min(time.Duration(n+1)*t+time.Duration(n)*cap, time.Hour)
		return t
	}
	for l := len(sc.Tiers) - 1; l >= 0; l-- {
		c := &sc.Tiers[l].Client
		c.Timeout, c.Deadline, c.PropagateDeadline = stretch(c.Timeout, c.Retry), 0, false
	}
	fleet.Timeout, fleet.Deadline = stretch(fleet.Timeout, fleet.Retry), 0
	// The retry counts alone set the worst case, as the closed form has
	// it; and the simulator balances one hop only (as cellThrough says).
	fleet.Balancer, fleet.OutlierDetection = scenario.Balancer{}, scenario.OutlierDetection{}
	sc.Fleets = []scenario.Fleet{fleet}
	run := 10*time.Second + below + 10*time.Second
	const most = 30 * time.Minute
	if run > most {
		run = most
	}
	sc.Duration = run.Truncate(sc.Tick) + sc.Tick
	sc.Traffic.Series = nil
	sc.Traffic.Arrivals = "constant"
	sc.Triggers = []scenario.Trigger{
		{Kind: scenario.TriggerOutage, Mode: scenario.OutageRefuse, At: 0, For: sc.Duration},
		{Kind: scenario.TriggerLoad, At: 10 * time.Second, For: sc.Duration - 10*time.Second, Rate: 0},
	}
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("check --stack: the outage run: %w", err)
	}
	res, err := opts.GridOptions().Simulate(ctx, sc)
	if err != nil {
		return nil, err
	}
	f := res.Fleets[0]
	out := make([]float64, len(f.Tiers))
	for i, t := range f.Tiers {
		out[i] = t.Amplification
	}
	return out, nil
}

// Render writes the stack: the chain, each layer's amplification, the
// settings to blame with their file and line, then check's verdict and
// map for the whole chain.
func (r *StackResult) Render(w io.Writer, st report.Style) error {
	fmt.Fprintf(w, "Stack: %s (outermost first; the last calls the origin)\n\n", r.Chain)
	t := report.Table{Title: "Worst-case amplification per layer: attempts per intent leaving each layer in a total outage (connections refused)",
		Columns: []report.Column{{Name: "layer"}, {Name: "file"}, {Name: "instances", Align: report.Right}, {Name: "max retries", Align: report.Right}, {Name: "closed form", Align: report.Right}, {Name: "simulated", Align: report.Right}}}
	for _, l := range r.Layers {
		n := fmt.Sprint(l.MaxRetries)
		if l.MaxRetries < 0 {
			n = "unlimited"
		}
		cf := "unbounded"
		if l.ClosedForm > 0 {
			cf = fmt.Sprintf("%.3g", l.ClosedForm)
			if !l.Exact {
				cf = "≤ " + cf
			}
		}
		inst := "per client"
		if l.Instances > 0 {
			inst = fmt.Sprint(l.Instances)
		}
		t.Rows = append(t.Rows, []string{l.Name, l.File, inst, n, cf, fmt.Sprintf("%.3g", l.Simulated)})
	}
	if err := t.Render(w, st); err != nil {
		return err
	}
	last := r.Layers[len(r.Layers)-1]
	agree := "agrees with"
	if !r.Agree {
		agree = "DISAGREES with"
	}
	fmt.Fprintf(w, "\nAt the origin: %.3g attempts per intent simulated; it %s the closed form (%s).\n", last.Simulated, agree,
		map[bool]string{true: "exact: the product over the layers of 1 + max_retries", false: "a bound: a budget, a breaker or a rule cuts the retries below it"}[last.Exact])
	fmt.Fprintf(w, "Verdict for the chain: %s\n", r.Level)
	if r.Level != Safe {
		for _, l := range r.Layers {
			for _, b := range l.Blame {
				at := b.File
				if b.Line > 0 {
					at = fmt.Sprintf("%s:%d", b.File, b.Line)
				}
				fmt.Fprintf(w, "  to blame: %s (%s): %s: %s\n", at, b.Layer, b.Setting, b.Why)
			}
		}
	}
	fmt.Fprintln(w)
	return r.Check.Render(w, st)
}

// BlameAt turns risks (a fleet's Risks) into settings to blame with their
// file and line, from the fleet's settings as the importer located them:
// for check on files, as CheckStack does per layer.
func BlameAt(layer, file string, settings []SettingAt, risks []string) []Blame {
	l := StackLayer{Name: layer, File: file, Settings: settings}
	var out []Blame
	for _, why := range risks {
		out = append(out, blameFor(l, why))
	}
	return out
}

// StackRuns bounds the simulations CheckStack makes for the chain layers
// with these options: check's envelope (every client count and seed,
// every fault the chain meets), every cell again with retries off, the
// margin's searches and the outage run. Counted before a run starts, to
// refuse one too large.
func StackRuns(co CheckOptions, layers []StackLayer) (int, error) {
	e, err := newEnvelope(co.Base, co.Load, co.Dip, co.Seeds, co.Clients, true)
	if err != nil {
		return 0, err
	}
	if len(layers) > 0 {
		e.faults = append(e.faults, faultsFor(e.base, []CheckInput{{Fleet: layers[0].Input.Fleet, Tiers: stackTiers(layers)}})...)
	}
	// At most: a fleet judged on every fault, every cell again with
	// retries off, and the margin's four searches.
	all := []CheckInput{{Fleet: scenario.Fleet{Retry: scenario.Retry{MaxRetries: 1}}}}
	n := len(e.jobs(all, nil)) + 1
	if !co.NoMargin {
		n += marginRuns(len(e.seeds))
	}
	return n, nil
}

// round3 rounds x to three decimals, as the JSON gives amplifications.
func round3(x float64) float64 { return math.Round(x*1000) / 1000 }
