package resilgrpc

import (
	"fmt"

	"google.golang.org/grpc/codes"

	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/resilgrpc/grpcconfig"
)

// ConfigOptions adapt the Guards that [FromServiceConfig] builds. The zero
// value builds what the service config means, and nothing more.
type ConfigOptions struct {
	// Guard is the template of every entry's GuardSettings. The entry
	// sets its Policy's MaxRetries, Backoff, Hedge, PushbackRestarts and
	// MaxPushback; everything else is kept: a Breaker (shared by every
	// entry, as the throttle is), AttemptTimeout, Clock, Rand, OnEvent.
	//
	// Guard.Policy.Budget, when set, replaces retryThrottling: this is how
	// a team moves from gRPC's throttle to a retry budget. Nil means the
	// config's throttle, one for the channel (none without
	// retryThrottling).
	//
	// Guard.Idempotency unset means Idempotent: gRPC retries every method
	// that has a retryPolicy, so keeping the meaning means the same trust.
	// Set NotIdempotent to retry only calls that carry a key.
	Guard resil.GuardSettings
}

// FromServiceConfig returns the settings that guard a channel as the
// service config c would, with one Guard per methodConfig entry, all paid
// from one budget. Every method's codes are the entry's retryable (or
// non-fatal) codes, and only those count as failures, as grpc-go's throttle
// counts them. A method no entry names still reports its successes to the
// throttle, as in grpc-go, through a Default Guard that never retries.
//
// Install the result with NewClient and Client.DialOptions, which also turn
// grpc-go's own retries off, and do not give the channel the same service
// config's retryPolicy: retries would run twice.
func FromServiceConfig(c *grpcconfig.Config, o ConfigOptions) (ClientSettings, error) {
	var s ClientSettings
	if c == nil {
		return s, fmt.Errorf("resilgrpc: FromServiceConfig: a nil config")
	}
	budget := o.Guard.Policy.Budget
	if budget == nil {
		b, err := c.NewThrottle()
		if err != nil {
			return s, fmt.Errorf("resilgrpc: retryThrottling: %w", err)
		}
		budget = b
	}
	guard := func(e *grpcconfig.Method) (*resil.Guard, error) {
		gs := o.Guard
		p := e.Policy(budget)
		p.Breaker, p.BreakerScope = gs.Policy.Breaker, gs.Policy.BreakerScope
		gs.Policy = p
		if gs.Idempotency == resil.IdempotencyUnset {
			gs.Idempotency = resil.Idempotent
		}
		return resil.NewGuard(gs)
	}
	s.Methods = map[string]Method{}
	hasDefault := false
	for i := range c.Methods {
		e := &c.Methods[i]
		g, err := guard(e)
		if err != nil {
			return s, fmt.Errorf("resilgrpc: methodConfig[%d]: %w", e.Index, err)
		}
		rc := make([]codes.Code, 0, len(e.Codes()))
		for _, x := range e.Codes() {
			rc = append(rc, codes.Code(x))
		}
		m := Method{Guard: g, RetryCodes: rc, FailureCodes: rc, Timeout: e.Timeout}
		if e.WaitForReady != nil {
			m.WaitForReady = *e.WaitForReady
		}
		for _, n := range e.Names {
			if n.Service == "" {
				s.Default, hasDefault = m, true
				continue
			}
			s.Methods[n.Path()] = m
		}
	}
	if !hasDefault {
		g, err := guard(nil)
		if err != nil {
			return s, err
		}
		s.Default = Method{Guard: g, RetryCodes: []codes.Code{}, FailureCodes: []codes.Code{}}
	}
	return s, nil
}
