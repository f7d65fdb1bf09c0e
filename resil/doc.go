// Package resil stops retry storms: a retry budget, a circuit breaker,
// backoff with jitter, idempotent-only retries, pushback, hedging under the
// same budget, and the retries/requests signal to alert on.
//
// # One decision core, several drivers
//
// Every policy here is a state machine that takes the time as an argument:
// [TokenBucket.Withdraw], [Breaker.Allow] and [Backoff.Delay] never read a
// clock and never draw from a global random source. [Policy] composes them
// into the decisions of one guarded call (may the first attempt go, may this
// failure be retried, after how long, may a hedge go), again with the time
// and the random source passed in. [Guard.Do] is the blocking driver of that
// core for production code; the retrystorm simulator drives the very same
// [Policy] with virtual time, so what you simulate is what you ship.
//
// # Why a budget
//
// A per-request retry count multiplies by a client count nobody chose: when
// every request fails at once, three retries each mean four times the load on
// a dependency that is already failing. A retry budget bounds the aggregate:
// retries may be at most a ratio r of the traffic that funds the bucket, so a
// fleet's offered load stays near (1+r) times normal however many clients it
// has. The price is paid in intents: a budget refuses retries that would have
// rescued some calls. Measure both, failures and intents lost.
//
// # The guarded call
//
// A [Guard] runs a function under a Policy:
//
//	budget, _ := resil.NewTokenBucket(resil.TokenBucketSettings{
//		Ratio: 0.1, Funding: resil.FundedByRequest, MinTokens: 10,
//	})
//	breaker, _ := resil.NewBreaker(resil.BreakerSettings{Threshold: 5})
//	g, _ := resil.NewGuard(resil.GuardSettings{
//		Idempotency:    resil.Idempotent,
//		AttemptTimeout: time.Second,
//		Policy: resil.Policy{
//			MaxRetries: 3, Budget: budget, Breaker: breaker,
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
// no per-attempt timeout, allocates nothing and reads no clock: the policies take the time as an
// argument, and the Guard reads it only when a decision needs it (an open
// breaker, a time window, a retry) or an observer wants durations.
//
// # Adaptive throttling
//
// A [Throttler] in Policy.Throttle refuses attempts locally with the
// probability the Google SRE book gives, max(0, (requests − K × accepts) /
// (requests + 1)) over a recent window: it sheds only the traffic the
// dependency would reject anyway, where an open breaker sheds everything. A
// breaker, a throttler or both may guard a dependency; their refusals are
// counted apart (ErrThrottled, EventThrottled, Stats.ThrottleRefusals).
//
// # Server side: shedding and concurrency limits
//
// A server drives three decision cores, each on injected time: a
// [DeadlineShedder] refuses work whose caller's deadline has passed or is
// too near for its service time; a [Limiter] caps the requests in flight
// and learns the cap from latency and drops ([LimitAIMD], [LimitGradient],
// [LimitVegas]) or keeps it fixed; a [WaitQueue] lets a bounded number wait, in FIFO,
// LIFO or adaptive-LIFO order, for a bounded time. A simulator's origin
// calls them on virtual time; a [Shedder] is their blocking driver for real
// servers, transport-neutral: resilhttp's Shed middleware and the gRPC
// interceptors call the same Admit and Done.
//
// # Adapters
//
// HTTP lives in resil/resilhttp (an http.RoundTripper that propagates the
// caller's deadline, and the Shed middleware), gRPC in resil/resilgrpc
// (interceptors, and gRPC service configs read by
// resil/resilgrpc/grpcconfig), Prometheus in resil/resilprom and
// OpenTelemetry in resil/resilotel, so this package depends on the standard
// library alone. Outlier detection (Envoy's and gRPC's rules) lives in
// resil/outlier, and the replica pickers that heed it in resil/balance.
package resil
