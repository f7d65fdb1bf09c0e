// Package resil stops retry storms: a retry budget, a circuit breaker,
// backoff with jitter, idempotent-only retries, pushback, hedging under the
// same budget, and the retries/requests signal to alert on.
//
// # One decision core, several drivers
//
// Every policy here is a state machine that takes the time as an argument:
// a budget's Withdraw, [Breaker.Allow] and [Backoff.Delay] never read a
// clock and never draw from a global random source. [Policy] composes them
// into the decisions of one guarded call (may the first attempt go, may this
// failure be retried, after how long, may a hedge go), again with the time
// and the random source passed in. [Guard.Do] is the blocking driver of that
// core for production code; the retrystorm simulator drives the very same
// [Policy] with virtual time, so what you simulate is what you ship.
//
// # Why a budget
//
// Three retries per request mean four times the load on a dependency that
// is already failing. A retry budget bounds the aggregate: retries at most
// a ratio r of the traffic that funds it, so offered load stays near (1+r)
// times normal however many clients there are. The price is paid in
// intents, retries refused that would have rescued calls: measure both.
//
// # The guarded call
//
// A [Guard] runs a function under a Policy:
//
//	bucket, _ := budget.NewTokenBucket(budget.TokenBucketSettings{
//		Ratio: 0.1, Funding: budget.FundedByRequest, MinTokens: 10,
//	})
//	breaker, _ := resil.NewBreaker(resil.BreakerSettings{Threshold: 5})
//	g, _ := resil.NewGuard(resil.GuardSettings{
//		Idempotency:    resil.Idempotent,
//		AttemptTimeout: time.Second,
//		Policy: resil.Policy{
//			MaxRetries: 3, Budget: bucket, Breaker: breaker,
//			Backoff: resil.Backoff{Schedule: resil.Exponential,
//				Base: 50 * time.Millisecond, Cap: 5 * time.Second, Jitter: resil.FullJitter},
//		},
//	})
//	err := g.Do(ctx, func(ctx context.Context) error { return callTheDependency(ctx) })
//
// When it gives up, the error wraps the reason (errors.Is(err,
// resil.ErrBudgetExhausted), ...) and the last attempt's error. [Call] and
// [CallWith] return values, pass the attempt's number, kind and idempotency
// key to the function, and take per-call options. [Guard.Stats] and
// [Guard.Observe] expose what happened, retries per request included.
//
// A successful call through a Guard with a budget and a closed breaker, and
// no per-attempt timeout, allocates nothing and reads no clock: the Guard
// reads it only when a decision needs it (an open breaker, a time window, a
// retry) or an observer wants durations.
//
// # Where things are
//
// This package is the client's core: [Guard], [Call] and [CallWith] drive
// a [Policy] of a [Backoff], a retry [Budget], a [Breaker] (which sheds
// everything while open), a [Throttler] (which sheds only what the
// dependency would reject anyway, by the Google SRE book's rule), a
// [Pacer] and hedging ([HedgeSettings]); [Classifier] judges each attempt;
// [Stats], [Event] and [StopError] report.
//
// Beside it, each in a package of its own:
//
//   - resil/budget, the retry budgets: the token bucket, its time-window
//     form (Finagle's, Linkerd's), and other products' rules as budgets of
//     the same Policy: gRPC's retry throttling (gRFC A6), the AWS SDKs'
//     retry quota and, as the Pacer of their adaptive mode, their client
//     rate limiter, and Envoy's concurrency budget;
//   - resil/admission, the server side: deadline shedding, a concurrency
//     limit fixed or learned (AIMD, gradient, Vegas), a bounded wait
//     queue, and the Shedder that drives the three for real servers;
//   - resil/outlier, outlier detection by Envoy's and gRPC's rules, and
//     resil/balance, the replica pickers that heed it;
//   - the adapters, alone in importing more than the standard library:
//     resil/resilhttp (Transport, Replicas, Shed), resil/resilgrpc
//     (interceptors, a balancer, grpcconfig), resilprom and resilotel.
package resil
