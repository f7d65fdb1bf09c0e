package importer

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/giveup"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
	"go.yaml.in/yaml/v3"
)

// Output formats Export writes besides the import formats.
const (
	// GoCode is a resil GuardSettings literal, with the budget and breaker
	// it needs.
	GoCode Format = "go"
	// ScenarioFleet is the fleet as a scenario file writes it.
	ScenarioFleet Format = "scenario"
)

// Export writes a fleet's policy in a format people run: an Envoy route
// and cluster fragment, an Istio VirtualService and DestinationRule, a
// Linkerd ServiceProfile, a gRPC service config, AWS SDK settings, nginx
// directives, HAProxy lines, resil Go code or a scenario fleet. It returns the text and what the format
// cannot express of the policy (each with what was written instead).
func Export(f scenario.Fleet, format Format) (text string, cannot []string, err error) {
	switch format {
	case Envoy:
		text, cannot = exportEnvoy(f)
	case Istio:
		text, cannot = exportIstio(f)
	case Linkerd:
		text, cannot = exportLinkerd(f)
	case GRPC:
		text, cannot = exportGRPC(f)
	case AWS:
		text, cannot = exportAWS(f)
	case NGINX:
		text, cannot = exportNginx(f)
	case HAProxy:
		text, cannot = exportHAProxy(f)
	case GoCode:
		text, cannot = exportGo(f)
	case ScenarioFleet:
		sc := &scenario.Scenario{Fleets: []scenario.Fleet{f}}
		y := string(scenario.Marshal(sc))
		i := strings.Index(y, "fleets:")
		if i < 0 {
			return "", nil, fmt.Errorf("export: no fleet in %q", y)
		}
		text = y[i:]
	default:
		return "", nil, fmt.Errorf("export: unknown format %q", format)
	}
	return text, cannot, nil
}

// Expressible reports whether format can write f's policy whole: its
// budget kind, its breaker, its backoff. Go code and scenario fleets
// express every policy.
func Expressible(f scenario.Fleet, format Format) bool {
	noBreaker := f.Breaker.Use == "" || f.Breaker.Use == scenario.BreakerNone
	fullJitter := f.Retry.MaxRetries == 0 || (f.Retry.Backoff.Use == "exponential" && f.Retry.Backoff.Jitter == "full")
	use := f.Budget.Use
	switch format {
	case Envoy:
		// Envoy always has a retry limit per cluster: no budget is not
		// something it can write.
		return noBreaker && fullJitter && f.Retry.MaxRetries >= 0 && use == scenario.BudgetConcurrency
	case Istio:
		return noBreaker && fullJitter && f.Retry.MaxRetries >= 0 && (use == scenario.BudgetNone || use == scenario.BudgetConcurrency)
	case GRPC:
		bo := f.Retry.Backoff
		grpcJitter := f.Retry.MaxRetries == 0 || (bo.Use == "exponential" && bo.Jitter == "factor" && bo.Factor == 0.2)
		return noBreaker && grpcJitter && f.Retry.MaxRetries >= 0 && f.Retry.MaxRetries <= 4 && (use == scenario.BudgetNone || use == scenario.BudgetGRPC) &&
			!slices.Contains(f.Retry.On, scenario.RetryOnTimeout) && len(f.Retry.On) > 0
	case Linkerd:
		return noBreaker && f.Retry.MaxRetries < 0 && use == scenario.BudgetWindow && f.Budget.Window.Funding == budget.FundedByAnswer && f.Budget.Window.Tower && f.Retry.Backoff.Use == "none"
	case AWS:
		return noBreaker && (use == scenario.BudgetAWS || use == scenario.BudgetAWSAdaptive)
	case NGINX, HAProxy:
		// No budget, no breaker, no hedging; nginx retries at once, HAProxy
		// after its turn-around timer.
		bo := f.Retry.Backoff.Use
		paced := bo == "" || bo == "none" || (format == HAProxy && bo == "fixed")
		return noBreaker && f.Hedge.Delay == 0 && (use == scenario.BudgetNone || use == "") && (f.Retry.MaxRetries == 0 || paced)
	}
	return true
}

// protoDur writes a duration as protobuf JSON does: "0.25s".
func protoDur(d time.Duration) string {
	// From the integer nanoseconds, not d.Seconds(): 1.36s as a float is
	// 1.3599999999999999, which protobuf's Duration refuses (at most nine
	// decimals).
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	s := sign + strconv.FormatInt(int64(d/time.Second), 10)
	if ns := int64(d % time.Second); ns != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%09d", ns), "0")
	}
	return s + "s"
}

// retries returns the fleet's retry count, and whether it is unlimited.
func retries(f scenario.Fleet) (int, bool) {
	if f.Retry.MaxRetries < 0 {
		return 0, true
	}
	return f.Retry.MaxRetries, false
}

// breakerLost says what a format without a breaker on the whole
// dependency loses.
func breakerLost(f scenario.Fleet, format string) []string {
	if f.Breaker.Use == "" || f.Breaker.Use == scenario.BreakerNone {
		return nil
	}
	return []string{fmt.Sprintf("the circuit breaker (%s): %s has none on the whole dependency; put resil's Breaker (or a mesh-level one) in front of the calls", f.Breaker.Use, format)}
}

func jitterLost(f scenario.Fleet, format, has string) []string {
	b := f.Retry.Backoff
	if b.Use == "exponential" && b.Jitter == "full" {
		return nil
	}
	if f.Retry.MaxRetries == 0 {
		return nil
	}
	return []string{fmt.Sprintf("the backoff (%s, %s jitter): %s only has %s", cmpOr(b.Use, "none"), cmpOr(b.Jitter, "none"), format, has)}
}

func cmpOr(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// envoyRetryOn writes retry.on as Envoy's conditions.
func envoyRetryOn(f scenario.Fleet) (string, []uint32) {
	on := f.Retry.On
	if len(on) == 0 || len(on) == len(giveup.Kinds) {
		return "5xx", nil
	}
	var conds []string
	var codes []uint32
	switch {
	case slices.Contains(on, scenario.RetryOnTimeout):
		conds = append(conds, "reset") // a per-try timeout and a refused connection are resets
	case slices.Contains(on, scenario.RetryOnRefused):
		conds = append(conds, "connect-failure")
	}
	if slices.Contains(on, scenario.RetryOnRejection) {
		codes = append(codes, 503, 429)
	}
	if slices.Contains(on, scenario.RetryOnGateway) {
		codes = append(codes, 502, 504) // a tier below that gave up
	}
	if slices.Contains(on, scenario.RetryOnError) {
		codes = append(codes, 500)
	}
	if len(codes) > 0 {
		conds = append(conds, "retriable-status-codes")
	}
	return strings.Join(conds, ","), codes
}

func exportEnvoy(f scenario.Fleet) (string, []string) {
	var b strings.Builder
	var lost []string
	n, unlimited := retries(f)
	if unlimited {
		n = 10
		lost = append(lost, "unlimited retries: Envoy needs a count; written as 10, the budget bounds the rest")
	}
	b.WriteString("# The route (route_config.virtual_hosts[].routes[].route):\n")
	if f.Deadline > 0 {
		fmt.Fprintf(&b, "timeout: %s\n", protoDur(f.Deadline))
	} else {
		b.WriteString("timeout: 0s  # no deadline\n")
	}
	if n == 0 {
		b.WriteString("# no retry_policy: no retries\n")
		return envoyCluster(&b, f, lost)
	}
	on, codes := envoyRetryOn(f)
	fmt.Fprintf(&b, "retry_policy:\n  retry_on: %s\n", on)
	if len(codes) > 0 {
		var cs []string
		for _, c := range codes {
			cs = append(cs, strconv.Itoa(int(c)))
		}
		fmt.Fprintf(&b, "  retriable_status_codes: [%s]\n", strings.Join(cs, ", "))
	}
	fmt.Fprintf(&b, "  num_retries: %d\n  per_try_timeout: %s\n", n, protoDur(f.Timeout))
	if bo := f.Retry.Backoff; bo.Base > 0 {
		fmt.Fprintf(&b, "  retry_back_off: {base_interval: %s, max_interval: %s}\n", protoDur(bo.Base), protoDur(max(bo.Cap, bo.Base)))
	}
	return envoyCluster(&b, f, lost)
}

func envoyCluster(b *strings.Builder, f scenario.Fleet, lost []string) (string, []string) {
	b.WriteString("# The cluster (clusters[]):\ncircuit_breakers:\n  thresholds:\n  - priority: DEFAULT\n")
	switch bu := f.Budget; bu.Use {
	case scenario.BudgetConcurrency:
		if c := bu.Concurrency; c.Percent == 0 {
			fmt.Fprintf(b, "    max_retries: %d\n", c.MinConcurrency)
		} else {
			fmt.Fprintf(b, "    retry_budget: {budget_percent: {value: %s}, min_retry_concurrency: %d}\n", strconv.FormatFloat(c.Percent, 'g', -1, 64), c.MinConcurrency)
		}
	case scenario.BudgetNone, "":
		// Never written as max_retries 4294967295: that removes the
		// retry circuit breaker of every route on the cluster.
		b.WriteString("    # no retry budget: Envoy's default max_retries (3 retries in flight per cluster) applies\n")
		lost = append(lost, "no budget: Envoy always bounds retries in flight per cluster (max_retries 3 by default); that default is kept, and the recommendation was simulated without it")
	default:
		pct := 100 * bu.Ratio()
		if pct == 0 {
			pct = 20
		}
		fmt.Fprintf(b, "    retry_budget: {budget_percent: {value: %s}, min_retry_concurrency: 3}\n", strconv.FormatFloat(pct, 'g', 3, 64))
		lost = append(lost, fmt.Sprintf("the %s budget: Envoy's only retry budget caps retries in flight, not a share of requests over time; written as a retry_budget of %s%% with min_retry_concurrency 3, another mechanism that was not simulated as written and behaves differently under a slow dependency: check it with retrystorm check", bu.Use, strconv.FormatFloat(pct, 'g', 3, 64)))
	}
	lost = append(lost, breakerLost(f, "Envoy")...)
	lost = append(lost, jitterLost(f, "Envoy", "fully jittered exponential back-off")...)
	return b.String(), lost
}

func exportIstio(f scenario.Fleet) (string, []string) {
	var b strings.Builder
	var lost []string
	n, unlimited := retries(f)
	if unlimited {
		n = 10
		lost = append(lost, "unlimited retries: Istio needs attempts; written as 10")
	}
	b.WriteString("# VirtualService spec.http[]:\n")
	if f.Deadline > 0 {
		fmt.Fprintf(&b, "timeout: %v\n", f.Deadline)
	}
	on, codes := envoyRetryOn(f)
	for _, c := range codes {
		on += "," + strconv.Itoa(int(c))
	}
	on = strings.ReplaceAll(on, "retriable-status-codes,", "")
	fmt.Fprintf(&b, "retries:\n  attempts: %d\n  perTryTimeout: %v\n  retryOn: %s\n", n, f.Timeout, on)
	if bo := f.Retry.Backoff; bo.Base > 0 && n > 0 {
		fmt.Fprintf(&b, "  backoff: %v\n", bo.Base)
		if bo.Cap != 10*bo.Base {
			lost = append(lost, fmt.Sprintf("the backoff cap (%v): Istio's is 10 times the base", bo.Cap))
		}
	}
	b.WriteString("# DestinationRule spec.trafficPolicy:\n")
	switch bu := f.Budget; bu.Use {
	case scenario.BudgetConcurrency:
		if c := bu.Concurrency; c.Percent == 0 {
			fmt.Fprintf(&b, "connectionPool: {http: {maxRetries: %d}}\n", c.MinConcurrency)
		} else {
			fmt.Fprintf(&b, "retryBudget: {percent: %s, minRetryConcurrency: %d}\n", strconv.FormatFloat(c.Percent, 'g', -1, 64), c.MinConcurrency)
		}
	case scenario.BudgetNone, "":
		b.WriteString("# no retryBudget: Istio puts no limit on retries\n")
	default:
		fmt.Fprintf(&b, "retryBudget: {percent: %s, minRetryConcurrency: 3}\n", strconv.FormatFloat(100*bu.Ratio(), 'g', 3, 64))
		lost = append(lost, fmt.Sprintf("the %s budget: Istio's retryBudget caps retries in flight, not a share of requests over time; written as %s%% with minRetryConcurrency 3, another mechanism that was not simulated as written: check it with retrystorm check", bu.Use, strconv.FormatFloat(100*bu.Ratio(), 'g', 3, 64)))
	}
	lost = append(lost, breakerLost(f, "Istio")...)
	lost = append(lost, jitterLost(f, "Istio", "Envoy's fully jittered exponential back-off")...)
	return b.String(), lost
}

func exportLinkerd(f scenario.Fleet) (string, []string) {
	var b strings.Builder
	var lost []string
	n, _ := retries(f)
	b.WriteString("# ServiceProfile spec:\nroutes:\n- name: <your route>\n  condition: {pathRegex: <your path>}\n")
	if n != 0 {
		b.WriteString("  isRetryable: true\n")
		if n > 0 {
			lost = append(lost, fmt.Sprintf("max_retries %d: Linkerd bounds retries by the budget alone", n))
		}
	}
	d := f.Deadline
	if d == 0 {
		d = f.Timeout
	}
	fmt.Fprintf(&b, "  timeout: %v\n", d)
	if d != f.Timeout {
		lost = append(lost, fmt.Sprintf("the attempt timeout (%v): Linkerd's timeout bounds the request, retries included", f.Timeout))
	}
	switch bu := f.Budget; bu.Use {
	case scenario.BudgetWindow:
		w := bu.Window
		fmt.Fprintf(&b, "retryBudget:\n  retryRatio: %s\n  minRetriesPerSecond: %s\n  ttl: %v\n", strconv.FormatFloat(w.Ratio, 'g', -1, 64), strconv.FormatFloat(w.MinRetriesPerSecond, 'g', -1, 64), w.TTL)
		if w.Funding != budget.FundedByAnswer || !w.Tower {
			lost = append(lost, "the window budget's arithmetic: Linkerd's budget is paid by every answer not retried and adds its floor to the ratio's allowance (funded_by: answer, tower: true)")
		}
	case scenario.BudgetTokenBucket:
		fmt.Fprintf(&b, "retryBudget:\n  retryRatio: %s\n  minRetriesPerSecond: 1\n  ttl: 10s\n", strconv.FormatFloat(bu.TokenBucket.Ratio, 'g', -1, 64))
		lost = append(lost, fmt.Sprintf("the token bucket: written as Linkerd's window budget of ratio %s (10s window, 1 retry a second per proxy), another mechanism that forgets instead of saving up and was not simulated as written: check it with retrystorm check", strconv.FormatFloat(bu.TokenBucket.Ratio, 'g', -1, 64)))
	default:
		b.WriteString("retryBudget: {retryRatio: 0.2, minRetriesPerSecond: 10, ttl: 10s}\n")
		lost = append(lost, fmt.Sprintf("the %s budget: Linkerd has only its window budget; written with Linkerd's defaults", cmpOr(bu.Use, "none")))
	}
	if n != 0 && f.Retry.Backoff.Use != "none" {
		lost = append(lost, "the backoff: a ServiceProfile has no backoff setting")
	}
	lost = append(lost, breakerLost(f, "Linkerd")...)
	return b.String(), lost
}

func exportGRPC(f scenario.Fleet) (string, []string) {
	var lost []string
	n, unlimited := retries(f)
	attempts := n + 1
	if unlimited || attempts > 5 {
		attempts = 5
		lost = append(lost, "more than 4 retries: gRPC caps maxAttempts at 5")
	}
	var codes []string
	on := f.Retry.On
	all := len(on) == 0
	if all || slices.Contains(on, scenario.RetryOnRejection) {
		codes = append(codes, `"UNAVAILABLE"`, `"RESOURCE_EXHAUSTED"`)
	} else if slices.Contains(on, scenario.RetryOnRefused) {
		codes = append(codes, `"UNAVAILABLE"`) // how gRPC reports a refused connection
	}
	if all || slices.Contains(on, scenario.RetryOnError) {
		codes = append(codes, `"INTERNAL"`)
	}
	if !all && slices.Contains(on, scenario.RetryOnGateway) {
		codes = append(codes, `"DEADLINE_EXCEEDED"`) // a gRPC application below that gave up
	}
	if all || slices.Contains(on, scenario.RetryOnTimeout) {
		lost = append(lost, fmt.Sprintf("the attempt timeout (%v) and retrying timeouts: a gRPC service config has one timeout for the whole call, and DEADLINE_EXCEEDED ends it", f.Timeout))
	}
	var b strings.Builder
	b.WriteString("{\n  \"methodConfig\": [{\n    \"name\": [{}],\n")
	if f.Deadline > 0 {
		fmt.Fprintf(&b, "    \"timeout\": %q,\n", protoDur(f.Deadline))
	} else {
		fmt.Fprintf(&b, "    \"timeout\": %q,\n", protoDur(f.Timeout))
	}
	bo := f.Retry.Backoff
	base, capd, mult := bo.Base, bo.Cap, bo.Multiplier
	if base <= 0 {
		base = 100 * time.Millisecond
	}
	if capd < base {
		capd = base
	}
	if mult <= 0 || bo.Use != "exponential" {
		mult = 1
	}
	if attempts > 1 {
		fmt.Fprintf(&b, "    \"retryPolicy\": {\n      \"maxAttempts\": %d,\n      \"initialBackoff\": %q,\n      \"maxBackoff\": %q,\n      \"backoffMultiplier\": %s,\n      \"retryableStatusCodes\": [%s]\n    }\n",
			attempts, protoDur(base), protoDur(capd), strconv.FormatFloat(mult, 'g', -1, 64), strings.Join(codes, ", "))
	} else {
		b.WriteString("    \"waitForReady\": false\n")
	}
	b.WriteString("  }]")
	switch bu := f.Budget; bu.Use {
	case scenario.BudgetGRPC:
		fmt.Fprintf(&b, ",\n  \"retryThrottling\": {\"maxTokens\": %s, \"tokenRatio\": %s}", strconv.FormatFloat(bu.GRPC.MaxTokens, 'g', -1, 64), strconv.FormatFloat(bu.GRPC.TokenRatio, 'g', -1, 64))
	case scenario.BudgetNone, "":
	default:
		ratio := bu.Ratio()
		if ratio == 0 {
			ratio = 0.1
		}
		fmt.Fprintf(&b, ",\n  \"retryThrottling\": {\"maxTokens\": 100, \"tokenRatio\": %s}", strconv.FormatFloat(ratio, 'f', 3, 64))
		lost = append(lost, fmt.Sprintf("the %s budget: written as gRPC's retry throttling with tokenRatio %.3g, which is funded by successes, charges failures rather than retries, and stops retries below half the tokens", bu.Use, ratio))
	}
	b.WriteString("\n}\n")
	lost = append(lost, breakerLost(f, "a gRPC service config")...)
	if bo.Use != "exponential" || bo.Jitter != "factor" || bo.Factor != 0.2 {
		lost = append(lost, fmt.Sprintf("the backoff's jitter (%s): grpc-go draws each wait from 0.8 to 1.2 times the schedule (gRFC A6 says 0 to 1)", cmpOr(bo.Jitter, "none")))
	}
	return b.String(), lost
}

func exportAWS(f scenario.Fleet) (string, []string) {
	var lost []string
	n, unlimited := retries(f)
	if unlimited {
		n = 9
		lost = append(lost, "unlimited retries: written as max_attempts 10")
	}
	mode := "standard"
	switch f.Budget.Use {
	case scenario.BudgetAWSAdaptive:
		mode = "adaptive"
	case scenario.BudgetAWS:
	default:
		lost = append(lost, fmt.Sprintf("the %s budget: the SDKs have only their retry quota (standard mode)", cmpOr(f.Budget.Use, "none")))
	}
	lost = append(lost, fmt.Sprintf("the timeout (%v), the backoff and retry.on: the SDK settings have none; set the timeout on the SDK's HTTP client", f.Timeout))
	lost = append(lost, breakerLost(f, "the AWS SDKs")...)
	// An imported profile keeps its own name ("aws batch" is [profile batch]).
	section := "[default]"
	if name, ok := strings.CutPrefix(f.Name, "aws "); ok && name != "" && name != "default" && name != "environment" && !strings.ContainsAny(name, "[]\n") {
		section = "[profile " + name + "]"
	}
	return fmt.Sprintf("%s\nretry_mode = %s\nmax_attempts = %d\n", section, mode, n+1), lost
}

// exportGo writes resil code: the budget, the breaker, and the
// GuardSettings literal.
func exportGo(f scenario.Fleet) (string, []string) {
	var b strings.Builder
	retryBudget := goBudget(&b, f)
	pacer := ""
	if f.Budget.Use == scenario.BudgetAWSAdaptive {
		b.WriteString("pacer, err := budget.NewClientRateLimiter(budget.ClientRateLimiterSettings{}) // the AWS SDKs' constants\nif err != nil {\n\treturn err\n}\n")
		pacer = "\n\t\tPacer:      pacer,"
	}
	breaker, lost := goBreaker(&b, f.Breaker)
	sched := map[string]string{"": "resil.NoDelay", "none": "resil.NoDelay", "fixed": "resil.Fixed", "exponential": "resil.Exponential"}[f.Retry.Backoff.Use]
	jit := map[string]string{"": "resil.NoJitter", "none": "resil.NoJitter", "full": "resil.FullJitter", "equal": "resil.EqualJitter", "decorrelated": "resil.DecorrelatedJitter", "factor": "resil.FactorJitter"}[f.Retry.Backoff.Jitter]
	maxRetries := strconv.Itoa(f.Retry.MaxRetries)
	if f.Retry.MaxRetries < 0 {
		maxRetries = "resil.Unlimited"
	}
	bo := f.Retry.Backoff
	factor := ""
	if bo.Factor != 0 {
		factor = ", Factor: " + goFloat(bo.Factor)
	}
	fmt.Fprintf(&b, "settings := resil.GuardSettings{\n\tIdempotency:    resil.Idempotent, // say NotIdempotent if the calls may not run twice\n\tAttemptTimeout: %s,\n\tPolicy: resil.Policy{\n\t\tMaxRetries: %s,\n\t\tBudget:     %s,\n\t\tBreaker:    %s,%s\n\t\tBackoff: resil.Backoff{Schedule: %s, Base: %s, Cap: %s, Multiplier: %s, Jitter: %s%s},\n\t},\n}\n",
		goDur(f.Timeout), maxRetries, retryBudget, breaker, pacer, sched, goDur(bo.Base), goDur(bo.Cap), goFloat(bo.Multiplier), jit, factor)
	if f.Deadline > 0 {
		fmt.Fprintf(&b, "// The deadline (%v) is the caller's: call g.Do with a context.WithTimeout of it.\n", f.Deadline)
	}
	if len(f.Retry.On) > 0 && len(f.Retry.On) < 3 {
		lost = append(lost, fmt.Sprintf("retry.on %v: set GuardSettings.RetryOn (or Classify) to the errors of those kinds", f.Retry.On))
	}
	return b.String(), lost
}

// goDur writes d as Go: "3 * time.Second".
func goDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d%time.Second == 0:
		return fmt.Sprintf("%d * time.Second", d/time.Second)
	case d%time.Millisecond == 0:
		return fmt.Sprintf("%d * time.Millisecond", d/time.Millisecond)
	}
	return fmt.Sprintf("%d", int64(d))
}

func goFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// goFunding writes f as Go.
func goFunding(f budget.Funding) string {
	switch f {
	case budget.FundedByRequest:
		return "budget.FundedByRequest"
	case budget.FundedByAnswer:
		return "budget.FundedByAnswer"
	}
	return "budget.FundedBySuccess"
}

// goBudget writes the code that makes f's retry budget into b, and
// returns the variable that holds it ("nil" for none).
func goBudget(b *strings.Builder, f scenario.Fleet) string {
	switch bu := f.Budget; bu.Use {
	case scenario.BudgetTokenBucket:
		fmt.Fprintf(b, "retryBudget, err := budget.NewTokenBucket(budget.TokenBucketSettings{\n\tRatio: %s, Funding: %s, MinTokens: %s, MaxTokens: %s,\n})\nif err != nil {\n\treturn err\n}\n",
			goFloat(bu.TokenBucket.Ratio), goFunding(bu.TokenBucket.Funding), goFloat(bu.TokenBucket.MinTokens), goFloat(bu.TokenBucket.MaxTokens))
		return "retryBudget"
	case scenario.BudgetWindow:
		tower := ""
		w := bu.Window
		if w.Tower {
			tower = " Tower: true,"
		}
		if w.Funding == budget.FundedByAnswer {
			// The failures the fleet retries pay nothing in.
			var r []string
			for _, o := range []struct{ kind, outcome string }{{scenario.RetryOnError, "resil.OutcomeFailure"}, {scenario.RetryOnRejection, "resil.OutcomeThrottled"}, {scenario.RetryOnTimeout, "resil.OutcomeTimeout"}} {
				if f.Retry.Retries(o.kind) {
					r = append(r, o.outcome)
				}
			}
			tower += " Retried: []resil.Outcome{" + strings.Join(r, ", ") + "},"
		}
		fmt.Fprintf(b, "retryBudget, err := budget.NewWindow(budget.WindowSettings{\n\tRatio: %s, Funding: %s, MinRetriesPerSecond: %s, TTL: %s,%s\n})\nif err != nil {\n\treturn err\n}\n",
			goFloat(w.Ratio), goFunding(w.Funding), goFloat(w.MinRetriesPerSecond), goDur(w.TTL), tower)
		return "retryBudget"
	case scenario.BudgetConcurrency:
		fmt.Fprintf(b, "retryBudget, err := budget.NewConcurrency(budget.ConcurrencySettings{Percent: %s, MinConcurrency: %d})\nif err != nil {\n\treturn err\n}\n", goFloat(bu.Concurrency.Percent), bu.Concurrency.MinConcurrency)
		return "retryBudget"
	case scenario.BudgetGRPC:
		fmt.Fprintf(b, "retryBudget, err := budget.NewGRPCThrottle(budget.GRPCThrottleSettings{MaxTokens: %s, TokenRatio: %s})\nif err != nil {\n\treturn err\n}\n", goFloat(bu.GRPC.MaxTokens), goFloat(bu.GRPC.TokenRatio))
		return "retryBudget"
	case scenario.BudgetAWS, scenario.BudgetAWSAdaptive:
		q := bu.AWS
		increment := fmt.Sprintf("NoRetryIncrement: %d", q.NoRetryIncrement)
		if q.NoIncrement {
			increment = "NoIncrement: true"
		}
		fmt.Fprintf(b, "retryBudget, err := budget.NewAWSQuota(budget.AWSQuotaSettings{Capacity: %d, RetryCost: %d, TimeoutCost: %d, %s})\nif err != nil {\n\treturn err\n}\n",
			q.Capacity, q.RetryCost, q.TimeoutCost, increment)
		return "retryBudget"
	}
	return "nil"
}

// goBreaker writes the code that makes breaker br into b, and returns
// the variable that holds it ("nil" for none) and what the code cannot
// say.
func goBreaker(b *strings.Builder, br scenario.Breaker) (string, []string) {
	var lost []string
	if br.Use != "" && br.Use != scenario.BreakerNone {
		rule := map[string]string{scenario.BreakerConsecutive: "resil.ConsecutiveFailures", scenario.BreakerCountWindow: "resil.CountWindow", scenario.BreakerTimeWindow: "resil.TimeWindow"}[br.Use]
		fields := []string{"Rule: " + rule}
		add := func(name, v string, zero bool) {
			if !zero {
				fields = append(fields, name+": "+v)
			}
		}
		add("Threshold", strconv.Itoa(br.Threshold), br.Threshold == 0)
		add("WindowSize", strconv.Itoa(br.WindowSize), br.WindowSize == 0)
		add("WindowPeriod", goDur(br.WindowPeriod), br.WindowPeriod == 0)
		add("MinCalls", strconv.Itoa(br.MinCalls), br.MinCalls == 0)
		add("FailureRate", goFloat(br.FailureRate), br.FailureRate == 0)
		add("SlowCall", goDur(br.SlowCall), br.SlowCall == 0)
		add("SlowCallRate", goFloat(br.SlowCallRate), br.SlowCallRate == 0)
		add("Cooldown", goDur(br.Cooldown), br.Cooldown == 0)
		add("MaxCooldown", goDur(br.MaxCooldown), br.MaxCooldown == 0)
		add("Probes", strconv.Itoa(br.Probes), br.Probes == 0)
		fmt.Fprintf(b, "breaker, err := resil.NewBreaker(resil.BreakerSettings{%s})\nif err != nil {\n\treturn err\n}\n", strings.Join(fields, ", "))
		if br.Scope == "retries" {
			lost = append(lost, "breaker scope retries: set Policy.BreakerScope to resil.GuardRetries")
		}
		return "breaker", lost
	}
	return "nil", lost
}

// num writes a number as the configs do.
func num(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// sameBackoff reports whether two fleets wait alike between attempts, as
// far as the products' configs say (base and cap).
func sameBackoff(a, b scenario.Fleet) bool {
	return a.Retry.Backoff.Base == b.Retry.Backoff.Base && a.Retry.Backoff.Cap == b.Retry.Backoff.Cap
}

// grpcCodes writes retry.on as a service config's retryableStatusCodes.
func grpcCodes(on []string, json bool) string {
	var codes []string
	q := func(s string) string {
		if json {
			return strconv.Quote(s)
		}
		return s
	}
	all := len(on) == 0
	if all || slices.Contains(on, scenario.RetryOnRejection) {
		codes = append(codes, q("UNAVAILABLE"))
	}
	if all || slices.Contains(on, scenario.RetryOnError) {
		codes = append(codes, q("INTERNAL"))
	}
	if !all && slices.Contains(on, scenario.RetryOnGateway) {
		codes = append(codes, q("DEADLINE_EXCEEDED"))
	}
	return "[" + strings.Join(codes, ", ") + "]"
}

// editGRPC edits a service config's method config and its retry
// throttling. The method's name list (its scope) is never touched.
func editGRPC(open func(string) (*yamlFile, error), loc location, user, rec scenario.Fleet) ([]string, error) {
	f, err := open(loc.file)
	if err != nil {
		return nil, err
	}
	if len(f.docs) != 1 {
		return nil, fmt.Errorf("%s: not one JSON document", f.name)
	}
	mc := lookup(f.docs[0], loc.path)
	if mc == nil {
		return nil, fmt.Errorf("%s: %s is not there", f.name, loc.path)
	}
	var notes []string
	n, unlimited := retries(rec)
	if unlimited || n > 4 {
		n = 4
		notes = append(notes, "more than 4 retries: gRPC caps maxAttempts at 5; written as 5")
	}
	bo := rec.Retry.Backoff
	var rp []kv
	if n != user.Retry.MaxRetries {
		rp = append(rp, kv{Key: "maxAttempts", Value: strconv.Itoa(n + 1)})
	}
	if !sameBackoff(user, rec) && n > 0 {
		rp = append(rp, kv{Key: "initialBackoff", Value: protoDur(bo.Base), Quoted: true}, kv{Key: "maxBackoff", Value: protoDur(max(bo.Cap, bo.Base)), Quoted: true})
		if bo.Multiplier > 0 && bo.Multiplier != user.Retry.Backoff.Multiplier {
			rp = append(rp, kv{Key: "backoffMultiplier", Value: num(bo.Multiplier)})
		}
	}
	switch old := child(mc, "retryPolicy"); {
	case n == 0:
		if old != nil {
			notes = append(notes, "no retries: a retryPolicy needs maxAttempts of 2 or more; remove your retryPolicy to send each call once (not done here)")
		}
	case child(mc, "hedgingPolicy") != nil:
		notes = append(notes, "retries: this method config hedges, and a service config cannot both retry and hedge; your hedgingPolicy is kept")
	case old == nil:
		// A new retry policy needs every field; its codes are rec's.
		rp = []kv{{Key: "maxAttempts", Value: strconv.Itoa(n + 1)}, {Key: "initialBackoff", Value: protoDur(bo.Base), Quoted: true},
			{Key: "maxBackoff", Value: protoDur(max(bo.Cap, bo.Base)), Quoted: true}, {Key: "backoffMultiplier", Value: num(max(bo.Multiplier, 1))},
			{Key: "retryableStatusCodes", Value: grpcCodes(rec.Retry.On, f.json)}}
		notes = append(notes, "retryableStatusCodes: your method config had no retry policy; written as "+grpcCodes(rec.Retry.On, false))
		if err := f.set(mc, []kv{{Key: "retryPolicy", Map: rp}}); err != nil {
			return nil, err
		}
	default:
		if !slices.Equal(user.Retry.On, rec.Retry.On) {
			if err := f.replaceValue(child(old, "retryableStatusCodes"), grpcCodes(rec.Retry.On, f.json)); err != nil {
				return nil, err
			}
		}
		if len(rp) > 0 {
			if err := f.set(old, rp); err != nil {
				return nil, err
			}
		}
	}
	if rec.Retry.MaxRetries != 0 {
		switch bu := rec.Budget; {
		case bu.Use == scenario.BudgetGRPC:
			if !user.Budget.Equal(bu) {
				if err := f.set(f.docs[0], []kv{{Key: "retryThrottling", Map: []kv{{Key: "maxTokens", Value: num(bu.GRPC.MaxTokens)}, {Key: "tokenRatio", Value: num(bu.GRPC.TokenRatio)}}}}); err != nil {
					return nil, err
				}
			}
		case bu.Use == scenario.BudgetNone || bu.Use == "":
			if child(f.docs[0], "retryThrottling") != nil {
				notes = append(notes, "no budget: your retryThrottling is kept (advise never removes a limit)")
			}
		case !user.Budget.Equal(bu):
			notes = append(notes, fmt.Sprintf("the %s budget: a service config has only retryThrottling; your file's budget is kept", bu.Use))
		}
	}
	notes = append(notes, breakerLost(rec, "a gRPC service config")...)
	if bo.Jitter != "factor" && rec.Retry.MaxRetries != 0 {
		notes = append(notes, fmt.Sprintf("the backoff's jitter (%s): grpc-go draws each wait from 0.8 to 1.2 times the schedule", cmpOr(bo.Jitter, "none")))
	}
	return notes, nil
}

// envoyBudget is the DEFAULT thresholds' settings for a concurrency
// budget.
func envoyBudget(bu scenario.Budget) []kv {
	c := bu.Concurrency
	if c.Percent == 0 {
		return []kv{{Key: "max_retries", Value: strconv.Itoa(c.MinConcurrency)}}
	}
	return []kv{{Key: "retry_budget", Map: []kv{{Key: "budget_percent", Map: []kv{{Key: "value", Value: num(c.Percent)}}},
		{Key: "min_retry_concurrency", Value: strconv.Itoa(c.MinConcurrency)}}}}
}

// walk returns the first mapping under n (n included) for which match
// holds.
func walk(n *yaml.Node, match func(*yaml.Node) bool) *yaml.Node {
	n = deref(n)
	if n == nil {
		return nil
	}
	if n.Kind == yaml.MappingNode && match(n) {
		return n
	}
	for _, c := range n.Content {
		if c.Kind == yaml.AliasNode {
			continue
		}
		if m := walk(c, match); m != nil {
			return m
		}
	}
	return nil
}

// budgetNotes says what happens to the user's limit when rec's budget is
// one the format cannot write, or none: it is kept, never removed.
func budgetNotes(user, rec scenario.Fleet, product, has string) []string {
	switch bu := rec.Budget; {
	case rec.Retry.MaxRetries == 0:
	case bu.Use == scenario.BudgetNone || bu.Use == "":
		if user.Budget.Use != scenario.BudgetNone && user.Budget.Use != "" {
			return []string{"no budget: your limit on retries is kept (advise never removes a limit)"}
		}
	default:
		return []string{fmt.Sprintf("the %s budget: %s has only %s; your file's budget is kept", bu.Use, product, has)}
	}
	return nil
}

// editEnvoy edits the route's retry policy (or its virtual host's, which
// every route of it without its own shares: said so) and the DEFAULT
// thresholds of the route's cluster.
func editEnvoy(open func(string) (*yamlFile, error), srcs []Source, loc location, user, rec scenario.Fleet) ([]string, error) {
	f, err := open(loc.file)
	if err != nil {
		return nil, err
	}
	route, vh := envoyRouteAt(f, loc.path)
	if route == nil {
		return nil, fmt.Errorf("%s: %s is not there", f.name, loc.path)
	}
	var notes []string
	n, unlimited := retries(rec)
	if unlimited {
		n = 10
		notes = append(notes, "unlimited retries: Envoy needs a count; written as 10")
	}
	bo := rec.Retry.Backoff
	var rp []kv
	if n != user.Retry.MaxRetries {
		rp = append(rp, kv{Key: "num_retries", Value: strconv.Itoa(n)})
	}
	if !sameBackoff(user, rec) && n > 0 && bo.Base > 0 {
		rp = append(rp, kv{Key: "retry_back_off", Map: []kv{{Key: "base_interval", Value: protoDur(bo.Base), Quoted: true}, {Key: "max_interval", Value: protoDur(max(bo.Cap, bo.Base)), Quoted: true}}})
	}
	on, codes := envoyRetryOn(rec)
	codeList := func() string {
		var cs []string
		for _, c := range codes {
			cs = append(cs, strconv.Itoa(int(c)))
		}
		return "[" + strings.Join(cs, ", ") + "]"
	}
	action := child(route, "route")
	old := child(action, "retry_policy")
	if old == nil && vh != nil && child(vh, "retry_policy") != nil {
		old = child(vh, "retry_policy")
		notes = append(notes, "scope: the retry policy is the virtual host's, so the edit applies to every route of it that has none of its own")
	}
	switch {
	case old == nil && n == 0:
	case old == nil:
		kvs := []kv{{Key: "retry_on", Value: on, Quoted: true}}
		if len(codes) > 0 {
			kvs = append(kvs, kv{Key: "retriable_status_codes", Value: codeList()})
		}
		kvs = append(kvs, kv{Key: "num_retries", Value: strconv.Itoa(n)})
		if bo.Base > 0 {
			kvs = append(kvs, kv{Key: "retry_back_off", Map: []kv{{Key: "base_interval", Value: protoDur(bo.Base), Quoted: true}, {Key: "max_interval", Value: protoDur(max(bo.Cap, bo.Base)), Quoted: true}}})
		}
		notes = append(notes, "retry_on: the route had no retry policy; written as "+on)
		if err := f.set(action, []kv{{Key: "retry_policy", Map: kvs}}); err != nil {
			return nil, err
		}
	default:
		if !slices.Equal(user.Retry.On, rec.Retry.On) {
			rp = append(rp, kv{Key: "retry_on", Value: keepUnmodelled(on, child(old, "retry_on")), Quoted: true})
			if len(codes) > 0 {
				if c := child(old, "retriable_status_codes"); c != nil {
					if err := f.replaceValue(c, codeList()); err != nil {
						return nil, err
					}
				} else {
					rp = append(rp, kv{Key: "retriable_status_codes", Value: codeList()})
				}
			}
		}
		if len(rp) > 0 {
			if err := f.set(old, rp); err != nil {
				return nil, err
			}
		}
	}
	// The budget: the DEFAULT thresholds of the route's cluster.
	if bu := rec.Budget; bu.Use == scenario.BudgetConcurrency && n > 0 && !bu.Equal(user.Budget) {
		more, err := editEnvoyBudget(open, srcs, loc.cluster, bu)
		if err != nil {
			return nil, err
		}
		notes = append(notes, more...)
	} else if n > 0 && !rec.Budget.Equal(user.Budget) {
		notes = append(notes, budgetNotes(user, rec, "Envoy", "its circuit breaker's max_retries and retry_budget")...)
	}
	notes = append(notes, breakerLost(rec, "Envoy")...)
	notes = append(notes, jitterLost(rec, "Envoy", "fully jittered exponential back-off")...)
	return notes, nil
}

// envoyRouteAt is the route at path in f (a route with a route action),
// and its virtual host; nil when it is not there.
func envoyRouteAt(f *yamlFile, path string) (route, vh *yaml.Node) {
	vhPath, _, _ := strings.Cut(path, ".routes[")
	if strings.HasPrefix(path, "routes[") {
		vhPath = ""
	}
	for _, d := range f.docs {
		if r := lookup(d, path); r != nil && child(r, "route") != nil {
			route, vh = r, lookup(d, vhPath)
			break
		}
	}
	return route, vh
}

// editEnvoyBudget writes budget bu into the DEFAULT thresholds of the
// cluster named cluster, in the file of srcs that has it, or says where
// it could not.
func editEnvoyBudget(open func(string) (*yamlFile, error), srcs []Source, cluster string, bu scenario.Budget) ([]string, error) {
	var notes []string
	cf, cl, _ := findDoc(open, srcs, func(d *yaml.Node) bool {
		return walk(d, func(m *yaml.Node) bool { return str(m, "name") == cluster && isCluster(m) }) != nil
	})
	if cl != nil {
		cl = walk(cl, func(m *yaml.Node) bool { return str(m, "name") == cluster && isCluster(m) })
	}
	switch th := lookup(cl, "circuit_breakers.thresholds"); {
	case cl == nil:
		notes = append(notes, fmt.Sprintf("the budget: cluster %q is not in the files given; set its circuit_breakers.thresholds (priority DEFAULT) to %s", cluster, describeBudget(bu)))
	case th == nil:
		if err := cf.set(cl, []kv{{Key: "circuit_breakers", Map: []kv{{Key: "thresholds", Value: "[{" + cf.flow(append([]kv{{Key: "priority", Value: "DEFAULT", Quoted: true}}, envoyBudget(bu)...)) + "}]"}}}}); err != nil {
			return nil, err
		}
	default:
		var entry *yaml.Node
		for _, e := range th.Content {
			if p := str(e, "priority"); p == "" || p == "DEFAULT" {
				entry = e
				break
			}
		}
		if entry == nil {
			notes = append(notes, fmt.Sprintf("the budget: cluster %q has no DEFAULT thresholds; add one with %s", cluster, describeBudget(bu)))
			break
		}
		if bu.Concurrency.Percent == 0 && child(entry, "retry_budget") != nil {
			notes = append(notes, "the budget: your retry_budget is kept (Envoy ignores max_retries beside one)")
			break
		}
		if err := cf.set(entry, envoyBudget(bu)); err != nil {
			return nil, err
		}
		if bu.Concurrency.Percent > 0 && child(entry, "max_retries") != nil {
			notes = append(notes, "the budget: your max_retries stays as it is; Envoy ignores it beside a retry_budget")
		}
	}
	return notes, nil
}

// istioKind matches an Istio object of kind and name.
func istioKind(kind, name string) func(*yaml.Node) bool {
	return func(d *yaml.Node) bool {
		return str(d, "kind") == kind && str(get(d, "metadata"), "name") == name && strings.Contains(str(d, "apiVersion"), "istio.io")
	}
}

// editIstio edits the VirtualService route's retries and the
// DestinationRule of its host.
func editIstio(open func(string) (*yamlFile, error), srcs []Source, loc location, user, rec scenario.Fleet) ([]string, error) {
	kind, name, _ := strings.Cut(loc.object, " ")
	f, vs, _ := findDoc(open, srcs, istioKind(kind, name))
	if vs == nil {
		return nil, fmt.Errorf("%s: %s is not there", loc.file, loc.object)
	}
	h := lookup(vs, loc.path)
	if h == nil {
		return nil, fmt.Errorf("%s: %s: %s is not there", f.name, loc.object, loc.path)
	}
	var notes []string
	n, unlimited := retries(rec)
	if unlimited {
		n = 10
		notes = append(notes, "unlimited retries: Istio needs attempts; written as 10")
	}
	bo := rec.Retry.Backoff
	var kvs []kv
	if n != user.Retry.MaxRetries {
		kvs = append(kvs, kv{Key: "attempts", Value: strconv.Itoa(n)})
	}
	if n > 0 && bo.Base > 0 && bo.Base != user.Retry.Backoff.Base {
		kvs = append(kvs, kv{Key: "backoff", Value: fmtDur(bo.Base), Quoted: true})
	}
	if bo.Cap != 10*bo.Base && n > 0 {
		notes = append(notes, fmt.Sprintf("the backoff cap (%v): Istio's is 10 times the base", bo.Cap))
	}
	if !slices.Equal(user.Retry.On, rec.Retry.On) && n > 0 {
		on, codes := envoyRetryOn(rec)
		for _, c := range codes {
			on += "," + strconv.Itoa(int(c))
		}
		kvs = append(kvs, kv{Key: "retryOn", Value: keepUnmodelled(strings.ReplaceAll(on, "retriable-status-codes,", ""), child(child(h, "retries"), "retryOn")), Quoted: true})
	}
	if child(h, "retries") == nil && len(kvs) > 0 && n == user.Retry.MaxRetries {
		// A new retries block says its attempts: the count stays the one
		// Istio's default gave.
		kvs = append([]kv{{Key: "attempts", Value: strconv.Itoa(n)}}, kvs...)
	}
	if len(kvs) > 0 {
		if err := f.set(h, []kv{{Key: "retries", Map: kvs}}); err != nil {
			return nil, err
		}
	}
	if n == 0 {
		notes = append(notes, istioNoRetries(f, child(h, "retries"))...)
	}
	more, err := istioBudget(open, srcs, loc, user, rec, n)
	if err != nil {
		return nil, err
	}
	notes = append(notes, more...)
	notes = append(notes, breakerLost(rec, "Istio")...)
	notes = append(notes, jitterLost(rec, "Istio", "Envoy's fully jittered exponential back-off")...)
	return notes, nil
}

// istioBudget edits the DestinationRule of the route's host: its retry
// budget, or connectionPool.http.maxRetries, as rec's concurrency budget
// says; n is the retries the route is written with.
func istioBudget(open func(string) (*yamlFile, error), srcs []Source, loc location, user, rec scenario.Fleet, n int) ([]string, error) {
	var notes []string
	if bu := rec.Budget; bu.Use == scenario.BudgetConcurrency && n > 0 && !bu.Equal(user.Budget) {
		short := func(s string) string { return strings.SplitN(s, ".", 2)[0] }
		df, dr, _ := findDoc(open, srcs, func(d *yaml.Node) bool {
			host := str(get(d, "spec"), "host")
			return str(d, "kind") == "DestinationRule" && host != "" && (host == loc.host || short(host) == short(loc.host))
		})
		var set []kv
		if bu.Concurrency.Percent == 0 {
			set = []kv{{Key: "connectionPool", Map: []kv{{Key: "http", Map: []kv{{Key: "maxRetries", Value: strconv.Itoa(bu.Concurrency.MinConcurrency)}}}}}}
		} else {
			set = []kv{{Key: "retryBudget", Map: []kv{{Key: "percent", Value: num(bu.Concurrency.Percent)}, {Key: "minRetryConcurrency", Value: strconv.Itoa(bu.Concurrency.MinConcurrency)}}}}
		}
		if dr == nil {
			notes = append(notes, fmt.Sprintf("the budget: no DestinationRule for host %s in the files given; give one a trafficPolicy with %s", loc.host, describeBudget(bu)))
		} else if err := df.set(get(dr, "spec"), []kv{{Key: "trafficPolicy", Map: set}}); err != nil {
			return nil, err
		}
	} else if n > 0 && !rec.Budget.Equal(user.Budget) {
		notes = append(notes, budgetNotes(user, rec, "Istio", "a DestinationRule's retryBudget and connectionPool.http.maxRetries")...)
	}
	return notes, nil
}

// editLinkerd edits the ServiceProfile route's isRetryable and the
// profile's retry budget (which every route of the profile shares: said
// so).
func editLinkerd(open func(string) (*yamlFile, error), srcs []Source, loc location, user, rec scenario.Fleet) ([]string, error) {
	_, name, _ := strings.Cut(loc.object, " ")
	f, sp, _ := findDoc(open, srcs, func(d *yaml.Node) bool {
		return str(d, "kind") == "ServiceProfile" && str(get(d, "metadata"), "name") == name
	})
	if sp == nil {
		return nil, fmt.Errorf("%s: %s is not there", loc.file, loc.object)
	}
	r := lookup(sp, loc.path)
	if r == nil {
		return nil, fmt.Errorf("%s: %s: %s is not there", f.name, loc.object, loc.path)
	}
	var notes []string
	if (rec.Retry.MaxRetries != 0) != (user.Retry.MaxRetries != 0) {
		if err := f.set(r, []kv{{Key: "isRetryable", Value: strconv.FormatBool(rec.Retry.MaxRetries != 0)}}); err != nil {
			return nil, err
		}
	}
	if rec.Retry.MaxRetries > 0 {
		notes = append(notes, fmt.Sprintf("max_retries %d: Linkerd bounds retries by the budget alone", rec.Retry.MaxRetries))
	}
	if bu := rec.Budget; bu.Use == scenario.BudgetWindow && rec.Retry.MaxRetries != 0 && !bu.Equal(user.Budget) {
		if err := f.set(get(sp, "spec"), []kv{{Key: "retryBudget", Map: []kv{{Key: "retryRatio", Value: num(bu.Window.Ratio)},
			{Key: "minRetriesPerSecond", Value: num(bu.Window.MinRetriesPerSecond)}, {Key: "ttl", Value: fmtDur(bu.Window.TTL), Quoted: true}}}}); err != nil {
			return nil, err
		}
		notes = append(notes, "scope: the retry budget is the ServiceProfile's, shared by every route of "+name)
	} else if rec.Retry.MaxRetries != 0 && !rec.Budget.Equal(user.Budget) {
		notes = append(notes, budgetNotes(user, rec, "Linkerd", "its window retryBudget")...)
	}
	if rec.Retry.MaxRetries != 0 && rec.Retry.Backoff.Use != "none" {
		notes = append(notes, "the backoff: a ServiceProfile has no backoff setting")
	}
	notes = append(notes, breakerLost(rec, "Linkerd")...)
	return notes, nil
}

// editAWS edits the profile's max_attempts and retry_mode lines in the
// shared config file.
func editAWS(srcs []Source, loc location, user, rec scenario.Fleet) ([]Edited, []string, error) {
	var src *Source
	for i := range srcs {
		if srcs[i].Name == loc.file {
			src = &srcs[i]
		}
	}
	profile, ok := strings.CutPrefix(loc.path, "profile ")
	if src == nil || !ok {
		return nil, nil, fmt.Errorf("importer: %s is not among the files given", loc.file)
	}
	var notes []string
	n, unlimited := retries(rec)
	if unlimited {
		n = 9
		notes = append(notes, "unlimited retries: written as max_attempts 10")
	}
	want := map[string]string{}
	if n != user.Retry.MaxRetries {
		want["max_attempts"] = strconv.Itoa(n + 1)
	}
	switch rec.Budget.Use {
	case scenario.BudgetAWS:
		if user.Budget.Use != scenario.BudgetAWS {
			want["retry_mode"] = "standard"
		}
	case scenario.BudgetAWSAdaptive:
		if user.Budget.Use != scenario.BudgetAWSAdaptive {
			want["retry_mode"] = "adaptive"
		}
	default:
		if !rec.Budget.Equal(user.Budget) {
			notes = append(notes, budgetNotes(user, rec, "the AWS SDKs", "their retry quota")...)
		}
	}
	after, err := awsWrite(src.Name, src.Data, profile, want)
	if err != nil {
		return nil, nil, err
	}
	notes = append(notes, fmt.Sprintf("the timeout (%v), the backoff and retry.on: the SDK settings have none; set the timeout on the SDK's HTTP client", rec.Timeout))
	notes = append(notes, breakerLost(rec, "the AWS SDKs")...)
	if bytes.Equal(after, src.Data) {
		return nil, notes, nil
	}
	return []Edited{{Name: src.Name, Before: src.Data, After: after, Diff: Diff(src.Name, src.Data, after)}}, notes, nil
}

// keepUnmodelled adds to a new list of Envoy retry conditions the user's
// conditions the simulator does not model (connect-failure,
// refused-stream, retriable-4xx...): a search of the conditions changes
// only those it ran, and never drops the others.
func keepUnmodelled(on string, old *yaml.Node) string {
	if old == nil {
		return on
	}
	have := strings.Split(on, ",")
	for _, c := range strings.Split(old.Value, ",") {
		c = strings.TrimSpace(c)
		if _, unread, err := retryOn(c, nil, false); err == nil && len(unread) > 0 && !slices.Contains(have, c) {
			have = append(have, c)
		}
	}
	return strings.Join(have, ",")
}
