package importer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/scenario"
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
// Linkerd ServiceProfile, a gRPC service config, AWS SDK settings, resil
// Go code or a scenario fleet. It returns the text and what the format
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
	budget := f.Budget.Use
	switch format {
	case Envoy, Istio:
		return noBreaker && fullJitter && f.Retry.MaxRetries >= 0 && (budget == scenario.BudgetNone || budget == scenario.BudgetConcurrency)
	case GRPC:
		bo := f.Retry.Backoff
		grpcJitter := f.Retry.MaxRetries == 0 || (bo.Use == "exponential" && bo.Jitter == "factor" && bo.Factor == 0.2)
		return noBreaker && grpcJitter && f.Retry.MaxRetries >= 0 && f.Retry.MaxRetries <= 4 && (budget == scenario.BudgetNone || budget == scenario.BudgetGRPC) &&
			!slices.Contains(f.Retry.On, scenario.RetryOnTimeout) && len(f.Retry.On) > 0
	case Linkerd:
		return noBreaker && f.Retry.MaxRetries < 0 && budget == scenario.BudgetWindow && f.Budget.Funding == "answer" && f.Budget.Tower && f.Retry.Backoff.Use == "none"
	case AWS:
		return noBreaker && (budget == scenario.BudgetAWS || budget == scenario.BudgetAWSAdaptive)
	}
	return true
}

// protoDur writes a duration as protobuf JSON does: "0.25s".
func protoDur(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
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
	if len(on) == 0 || len(on) == 4 {
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
		if bu.Percent == 0 {
			fmt.Fprintf(b, "    max_retries: %d\n", bu.MinConcurrency)
		} else {
			fmt.Fprintf(b, "    retry_budget: {budget_percent: {value: %s}, min_retry_concurrency: %d}\n", strconv.FormatFloat(bu.Percent, 'g', -1, 64), bu.MinConcurrency)
		}
	case scenario.BudgetNone, "":
		b.WriteString("    max_retries: 4294967295  # no limit on retries, as the policy has none\n")
	default:
		pct := 100 * bu.Ratio
		if pct == 0 {
			pct = 20
		}
		fmt.Fprintf(b, "    retry_budget: {budget_percent: {value: %s}, min_retry_concurrency: 3}\n", strconv.FormatFloat(pct, 'g', 3, 64))
		lost = append(lost, fmt.Sprintf("the %s budget: Envoy's only retry budget caps retries in flight, not a share of requests over time; written as a retry_budget of the same percentage, which behaves differently under a slow dependency: check it with retrystorm check", bu.Use))
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
		if bu.Percent == 0 {
			fmt.Fprintf(&b, "connectionPool: {http: {maxRetries: %d}}\n", bu.MinConcurrency)
		} else {
			fmt.Fprintf(&b, "retryBudget: {percent: %s, minRetryConcurrency: %d}\n", strconv.FormatFloat(bu.Percent, 'g', -1, 64), bu.MinConcurrency)
		}
	case scenario.BudgetNone, "":
		b.WriteString("# no retryBudget: Istio puts no limit on retries\n")
	default:
		fmt.Fprintf(&b, "retryBudget: {percent: %s, minRetryConcurrency: 3}\n", strconv.FormatFloat(100*bu.Ratio, 'g', 3, 64))
		lost = append(lost, fmt.Sprintf("the %s budget: Istio's retryBudget caps retries in flight, not a share of requests over time; written with the same percentage", bu.Use))
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
		fmt.Fprintf(&b, "retryBudget:\n  retryRatio: %s\n  minRetriesPerSecond: %s\n  ttl: %v\n", strconv.FormatFloat(bu.Ratio, 'g', -1, 64), strconv.FormatFloat(bu.MinRetriesPerSecond, 'g', -1, 64), bu.TTL)
		if bu.Funding != "answer" || !bu.Tower {
			lost = append(lost, "the window budget's arithmetic: Linkerd's budget is paid by every answer not retried and adds its floor to the ratio's allowance (funded_by: answer, tower: true)")
		}
	case scenario.BudgetTokenBucket:
		fmt.Fprintf(&b, "retryBudget:\n  retryRatio: %s\n  minRetriesPerSecond: 1\n  ttl: 10s\n", strconv.FormatFloat(bu.Ratio, 'g', -1, 64))
		lost = append(lost, "the token bucket: written as Linkerd's window budget of the same ratio (10s window), which forgets instead of saving up")
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
		fmt.Fprintf(&b, ",\n  \"retryThrottling\": {\"maxTokens\": %s, \"tokenRatio\": %s}", strconv.FormatFloat(bu.MaxTokens, 'g', -1, 64), strconv.FormatFloat(bu.TokenRatio, 'g', -1, 64))
	case scenario.BudgetNone, "":
	default:
		ratio := bu.Ratio
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
	var lost []string
	goDur := func(d time.Duration) string {
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
	num := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	funding := func(s string) string {
		switch s {
		case "request":
			return "resil.FundedByRequest"
		case "answer":
			return "resil.FundedByAnswer"
		}
		return "resil.FundedBySuccess"
	}
	budget := "nil"
	switch bu := f.Budget; bu.Use {
	case scenario.BudgetTokenBucket:
		fmt.Fprintf(&b, "budget, err := resil.NewTokenBucket(resil.TokenBucketSettings{\n\tRatio: %s, Funding: %s, MinTokens: %s, MaxTokens: %s,\n})\nif err != nil {\n\treturn err\n}\n",
			num(bu.Ratio), funding(bu.Funding), num(bu.MinTokens), num(bu.MaxTokens))
		budget = "budget"
	case scenario.BudgetWindow:
		tower := ""
		if bu.Tower {
			tower = " Tower: true,"
		}
		if bu.Funding == "answer" {
			// The failures the fleet retries pay nothing in.
			var r []string
			for _, o := range []struct{ kind, outcome string }{{scenario.RetryOnError, "resil.OutcomeFailure"}, {scenario.RetryOnRejection, "resil.OutcomeThrottled"}, {scenario.RetryOnTimeout, "resil.OutcomeTimeout"}} {
				if f.Retry.Retries(o.kind) {
					r = append(r, o.outcome)
				}
			}
			tower += " Retried: []resil.Outcome{" + strings.Join(r, ", ") + "},"
		}
		fmt.Fprintf(&b, "budget, err := resil.NewWindowBudget(resil.WindowBudgetSettings{\n\tRatio: %s, Funding: %s, MinRetriesPerSecond: %s, TTL: %s,%s\n})\nif err != nil {\n\treturn err\n}\n",
			num(bu.Ratio), funding(bu.Funding), num(bu.MinRetriesPerSecond), goDur(bu.TTL), tower)
		budget = "budget"
	case scenario.BudgetConcurrency:
		fmt.Fprintf(&b, "budget, err := resil.NewConcurrencyBudget(resil.ConcurrencyBudgetSettings{Percent: %s, MinConcurrency: %d})\nif err != nil {\n\treturn err\n}\n", num(bu.Percent), bu.MinConcurrency)
		budget = "budget"
	case scenario.BudgetGRPC:
		fmt.Fprintf(&b, "budget, err := resil.NewGRPCThrottle(resil.GRPCThrottleSettings{MaxTokens: %s, TokenRatio: %s})\nif err != nil {\n\treturn err\n}\n", num(bu.MaxTokens), num(bu.TokenRatio))
		budget = "budget"
	case scenario.BudgetAWS, scenario.BudgetAWSAdaptive:
		fmt.Fprintf(&b, "budget, err := resil.NewAWSQuota(resil.AWSQuotaSettings{Capacity: %d, RetryCost: %s, TimeoutCost: %s, NoRetryIncrement: %d})\nif err != nil {\n\treturn err\n}\n",
			bu.Capacity, num(bu.RetryCost), num(bu.TimeoutCost), bu.NoRetryIncrement)
		budget = "budget"
	}
	pacer := ""
	if f.Budget.Use == scenario.BudgetAWSAdaptive {
		b.WriteString("pacer, err := resil.NewClientRateLimiter(resil.ClientRateLimiterSettings{}) // the AWS SDKs' constants\nif err != nil {\n\treturn err\n}\n")
		pacer = "\n\t\tPacer:      pacer,"
	}
	breaker := "nil"
	if br := f.Breaker; br.Use != "" && br.Use != scenario.BreakerNone {
		rule := map[string]string{scenario.BreakerConsecutive: "resil.ConsecutiveFailures", scenario.BreakerCountWindow: "resil.CountWindow", scenario.BreakerTimeWindow: "resil.TimeWindow"}[br.Use]
		fields := []string{"Rule: " + rule}
		add := func(name, v string, zero bool) {
			if !zero {
				fields = append(fields, name+": "+v)
			}
		}
		add("Threshold", strconv.Itoa(br.Threshold), br.Threshold == 0)
		add("WindowSize", strconv.Itoa(br.WindowSize), br.WindowSize == 0)
		add("WindowPeriod", goDur(br.Window), br.Window == 0)
		add("MinCalls", strconv.Itoa(br.MinCalls), br.MinCalls == 0)
		add("FailureRate", num(br.FailureRate), br.FailureRate == 0)
		add("SlowCall", goDur(br.SlowCall), br.SlowCall == 0)
		add("SlowCallRate", num(br.SlowCallRate), br.SlowCallRate == 0)
		add("Cooldown", goDur(br.Cooldown), br.Cooldown == 0)
		add("MaxCooldown", goDur(br.MaxCooldown), br.MaxCooldown == 0)
		add("Probes", strconv.Itoa(br.Probes), br.Probes == 0)
		fmt.Fprintf(&b, "breaker, err := resil.NewBreaker(resil.BreakerSettings{%s})\nif err != nil {\n\treturn err\n}\n", strings.Join(fields, ", "))
		if br.Scope == "retries" {
			lost = append(lost, "breaker scope retries: set Policy.BreakerScope to resil.GuardRetries")
		}
		breaker = "breaker"
	}
	sched := map[string]string{"": "resil.NoDelay", "none": "resil.NoDelay", "fixed": "resil.Fixed", "exponential": "resil.Exponential"}[f.Retry.Backoff.Use]
	jit := map[string]string{"": "resil.NoJitter", "none": "resil.NoJitter", "full": "resil.FullJitter", "equal": "resil.EqualJitter", "decorrelated": "resil.DecorrelatedJitter", "factor": "resil.FactorJitter"}[f.Retry.Backoff.Jitter]
	maxRetries := strconv.Itoa(f.Retry.MaxRetries)
	if f.Retry.MaxRetries < 0 {
		maxRetries = "resil.Unlimited"
	}
	bo := f.Retry.Backoff
	factor := ""
	if bo.Factor != 0 {
		factor = ", Factor: " + num(bo.Factor)
	}
	fmt.Fprintf(&b, "settings := resil.GuardSettings{\n\tIdempotency:    resil.Idempotent, // say NotIdempotent if the calls may not run twice\n\tAttemptTimeout: %s,\n\tPolicy: resil.Policy{\n\t\tMaxRetries: %s,\n\t\tBudget:     %s,\n\t\tBreaker:    %s,%s\n\t\tBackoff: resil.Backoff{Schedule: %s, Base: %s, Cap: %s, Multiplier: %s, Jitter: %s%s},\n\t},\n}\n",
		goDur(f.Timeout), maxRetries, budget, breaker, pacer, sched, goDur(bo.Base), goDur(bo.Cap), num(bo.Multiplier), jit, factor)
	if f.Deadline > 0 {
		fmt.Fprintf(&b, "// The deadline (%v) is the caller's: call g.Do with a context.WithTimeout of it.\n", f.Deadline)
	}
	if len(f.Retry.On) > 0 && len(f.Retry.On) < 3 {
		lost = append(lost, fmt.Sprintf("retry.on %v: set GuardSettings.RetryOn (or Classify) to the errors of those kinds", f.Retry.On))
	}
	return b.String(), lost
}
