package importer

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/retrystorm/retrystorm/giveup"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

// Linkerd's ServiceProfile is read with a strict struct of our own that
// mirrors the CRD's documented schema (linkerd.io/v1alpha2): Linkerd's Go
// types pull in Kubernetes. Linkerd's documented defaults:
const (
	linkerdRatio     = 0.2              // "retries may add at most an additional 20% to the request load"
	linkerdMinPerSec = 10.0             // "plus an additional 10 free retries per second"
	linkerdTTL       = 10 * time.Second // retryBudget.ttl
	// A route has no timeout unless it sets one: the 10s default the docs
	// long gave was removed in 2020 (linkerd/linkerd2 pull 4958, stable-2.9;
	// controller/api/destination/profile_translator.go sets a route's
	// timeout only from its own field).
)

type serviceProfile struct {
	APIVersion string         `yaml:"apiVersion"`
	Kind       string         `yaml:"kind"`
	Metadata   map[string]any `yaml:"metadata"`
	Spec       struct {
		Routes      []spRoute     `yaml:"routes"`
		RetryBudget *spBudget     `yaml:"retryBudget"`
		OpaquePorts []any         `yaml:"opaquePorts"`
		DstOverride []spOverrides `yaml:"dstOverrides"`
	} `yaml:"spec"`
}

type spRoute struct {
	Name            string         `yaml:"name"`
	Condition       map[string]any `yaml:"condition"`
	ResponseClasses []struct {
		Condition map[string]any `yaml:"condition"`
		IsFailure bool           `yaml:"isFailure"`
	} `yaml:"responseClasses"`
	IsRetryable bool   `yaml:"isRetryable"`
	Timeout     string `yaml:"timeout"`
}

type spBudget struct {
	RetryRatio          *float64 `yaml:"retryRatio"`
	MinRetriesPerSecond *float64 `yaml:"minRetriesPerSecond"`
	TTL                 string   `yaml:"ttl"`
}

type spOverrides struct {
	Authority string `yaml:"authority"`
	Weight    any    `yaml:"weight"`
}

// strictKeys fails on a map key that t (a struct, through pointers and
// slices) has no field for, naming the file and line.
func strictKeys(file string, n *yaml.Node, t reflect.Type, path string) error {
	n = deref(n)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		for i, c := range n.Content {
			if err := strictKeys(file, c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			f, ok := fieldByTag(t, k)
			if !ok {
				return fmt.Errorf("%s:%d: %s: unknown field %q", file, n.Content[i].Line, path, k)
			}
			if err := strictKeys(file, n.Content[i+1], f.Type, joinPath(path, k)); err != nil {
				return err
			}
		}
	}
	return nil
}

func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if strings.Split(f.Tag.Get("yaml"), ",")[0] == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func importLinkerd(srcs []Source) ([]Fleet, error) {
	var out fleetSet
	n := 0
	for _, s := range srcs {
		docs, err := documents(s.Name, s.Data)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			if f, ok, err := linkerdRoute(s.Name, d); err != nil {
				return nil, err
			} else if ok {
				out.add(f)
				continue
			}
			if str(d, "kind") != "ServiceProfile" || !strings.Contains(str(d, "apiVersion"), "linkerd.io") {
				continue
			}
			var sp serviceProfile
			if err := strictKeys(s.Name, d, reflect.TypeOf(sp), ""); err != nil {
				return nil, err
			}
			if err := d.Decode(&sp); err != nil {
				return nil, fmt.Errorf("%s: %v", s.Name, strings.TrimPrefix(err.Error(), "yaml: "))
			}
			if err := checkLinkerdBudget(s.Name, d, &sp); err != nil {
				return nil, err
			}
			// Routes are counted before each profile's are built: the
			// profiles read so far hold them all.
			if n += len(sp.Spec.Routes); n > maxItems {
				return nil, admit(Linkerd, n, "routes")
			}
			fl, err := linkerdFleets(s.Name, &sp)
			if err != nil {
				return nil, err
			}
			for _, f := range fl {
				out.add(f)
			}
		}
	}
	return out.list, nil
}

func linkerdFleets(file string, sp *serviceProfile) ([]Fleet, error) {
	name, _ := sp.Metadata["name"].(string)
	var out []Fleet
	for i, r := range sp.Spec.Routes {
		f, err := linkerdProfileRoute(file, name, i, r, sp.Spec.RetryBudget)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// linkerdProfileRoute is the fleet of route i of ServiceProfile name,
// whose retry budget is rb.
func linkerdProfileRoute(file, name string, i int, r spRoute, rb *spBudget) (Fleet, error) {
	path := fmt.Sprintf("spec.routes[%d]", i)
	obj := Object{"ServiceProfile", name}
	p := &prov{file: file}
	sp := p.of(obj.Kind, obj.Name)
	f := scenario.Fleet{Name: r.Name, Retry: scenario.Retry{Backoff: noBackoff}}
	f.Product = string(giveup.Linkerd)
	if f.Name == "" {
		f.Name = fmt.Sprintf("%s route %d", name, i)
	}
	fleet := func() Fleet {
		return Fleet{Fleet: f, Format: Linkerd, File: file, Origin: fmt.Sprintf("%s: %s: %s", file, obj, path), From: p.list, Lost: p.lost, at: place{file, obj, path}}
	}
	if r.Timeout != "" {
		d, err := time.ParseDuration(r.Timeout)
		if err != nil || d <= 0 {
			return Fleet{}, fmt.Errorf("%s: %s: %s.timeout: %q is not a positive duration", file, obj, path, r.Timeout)
		}
		sp.set("timeout", fmtDur(d), path+".timeout").and("deadline")
		// The route's timeout covers the request, retries included.
		f.Timeout = p.wait("timeout", d, 0)
		f.Deadline = f.Timeout
	} else {
		sp.dflt("timeout", "none", path+".timeout", "Linkerd sets no route timeout unless the route has one (since stable-2.9)").and("deadline")
		f.Timeout = maxTimeout
		p.lose("no timeout at all: attempts are given %s, the longest the simulator takes", fmtDur(maxTimeout))
	}
	if len(r.ResponseClasses) > 0 {
		p.lose("responseClasses: the simulator's failures are what Linkerd counts by default (5xx answers); custom classes are not imported")
	}
	if !r.IsRetryable {
		sp.dflt("retry.max_retries", "0", path+".isRetryable", "isRetryable: false by default")
		f.Budget = scenario.Budget{Use: scenario.BudgetNone}
		return fleet(), nil
	}
	sp.set("retry.max_retries", "unlimited", path+".isRetryable").by(inParens, "Linkerd bounds retries by the budget alone")
	f.Retry.MaxRetries = -1
	f.Retry.On = []string{scenario.RetryOnError, scenario.RetryOnRejection, scenario.RetryOnGateway}
	p.note("retry.on", onText(f.Retry.On), "Linkerd retries failed answers (5xx, a layer below's 502 and 504 among them); a timeout or a refused connection is an error, not an answer, and is never retried (linkerd2-proxy retry.rs)")
	p.lose("Linkerd's ServiceProfile retries have no backoff setting: imported as retries sent at once")
	if err := linkerdProfileBudget(sp, &f, rb); err != nil {
		return Fleet{}, err
	}
	return fleet(), nil
}

// linkerdProfileBudget maps a ServiceProfile's retryBudget (nil: none) to f's
// budget, noting each field in p (the profile's view). A budget Linkerd's
// proxy drops, or a ratio of 0, leaves f no retries.
func linkerdProfileBudget(p *prov, f *scenario.Fleet, rb *spBudget) error {
	w := budget.WindowSettings{Funding: budget.FundedByAnswer, Tower: true, RetryCost: 1, TimeoutCost: 1, Ratio: linkerdRatio, MinRetriesPerSecond: linkerdMinPerSec, TTL: linkerdTTL}
	const bp = "spec.retryBudget"
	if rb != nil && rb.RetryRatio != nil {
		w.Ratio = linkerdRatioOf(p, *rb.RetryRatio)
	} else {
		p.dflt("budget.budget_ratio", "0.2", bp+".retryRatio", "Linkerd: retries add at most 20% to the request load")
	}
	if rb != nil && rb.MinRetriesPerSecond != nil {
		// A uint32 in Linkerd's API: whole retries per second.
		w.MinRetriesPerSecond = float64(p.count("minRetriesPerSecond", int64(*rb.MinRetriesPerSecond)))
		p.set("budget.min_retries_per_second", strconv.FormatFloat(w.MinRetriesPerSecond, 'g', -1, 64), bp+".minRetriesPerSecond")
	} else {
		p.dflt("budget.min_retries_per_second", "10", bp+".minRetriesPerSecond", "Linkerd: plus 10 retries per second")
	}
	noRetries := func() {
		f.Retry.MaxRetries, f.Retry.On = 0, nil
		f.Budget = scenario.Budget{Use: scenario.BudgetNone}
	}
	if rb != nil && rb.TTL != "" {
		d, err := time.ParseDuration(rb.TTL)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s: %s: %s.ttl: %q is not a positive duration", p.file, p.object, bp, rb.TTL)
		}
		if d < time.Second || d > time.Minute {
			// linkerd2-proxy (service-profiles/src/proto.rs) logs a
			// warning and drops the budget: the route then never retries.
			noRetries()
			p.note("retry.max_retries", "0", fmt.Sprintf("%s: %s.ttl %s is outside 1s to 60s: Linkerd's proxy drops the budget and the route does not retry", p.object, bp, fmtDur(d)))
			return nil
		}
		w.TTL = d
		p.set("budget.ttl", fmtDur(d), bp+".ttl")
	} else {
		p.dflt("budget.ttl", "10s", bp+".ttl", "retryBudget.ttl: 10s")
	}
	if w.Ratio <= 0 {
		noRetries()
		p.note("retry.max_retries", "0", "retryRatio 0 allows no retry beyond the floor, which the simulator cannot express alone")
		return nil
	}
	f.Budget = scenario.Budget{Use: scenario.BudgetWindow, Window: w}
	p.note("budget.funded_by", w.Funding.String(), "Linkerd's proxy deposits for every answer it does not retry")
	p.note("budget.tower", "true", "Linkerd's budget is tower's TpsBudget, which allows ratio x deposits plus the floor: in a total outage only the floor")
	return nil
}

// linkerdRatioOf is the budget ratio retryRatio r imports as, noted in p
// (the profile's view), with what the simulator cannot hold.
func linkerdRatioOf(p *prov, r float64) float64 {
	p.set("budget.budget_ratio", strconv.FormatFloat(r, 'g', -1, 64), "spec.retryBudget.retryRatio")
	ratio := r
	switch {
	case r > 0 && float32(r) == 0:
		p.lose("retryRatio %g is 0 as the float32 Linkerd holds it", r)
		ratio = 0
	case r > 1:
		p.lose("retryRatio %g: the simulator's budget_ratio is at most 1 (a retry for every request), and imports it as that", r)
		ratio = 1
	case r > 0 && r < 1e-6:
		p.lose("retryRatio %g: the simulator's budget_ratio is at least 0.000001, and imports it as that", r)
		ratio = 1e-6
	}
	if eff := 1 / math.Floor(1/ratio); ratio > 0 && eff != ratio {
		p.note("budget (effective ratio)", strconv.FormatFloat(eff, 'g', 4, 64), fmt.Sprintf("tower truncates 1/retryRatio: %g acts as 1/%g", ratio, math.Floor(1/ratio)))
	}
	return ratio
}
