package importer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/giveup"
	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/resil/resilgrpc/grpcconfig"
	"github.com/retrystorm/retrystorm/scenario"
)

// importGRPC reads gRPC service configs with the project's one reader,
// grpcconfig (which gives them grpc-go's meaning), and makes a fleet of
// each methodConfig entry that retries or hedges.
func importGRPC(srcs []Source) ([]Fleet, error) {
	var out fleetSet
	n := 0
	for _, s := range srcs {
		cfg, err := grpcconfig.Parse(s.Data, grpcconfig.Options{})
		if err != nil {
			var ge *grpcconfig.Error
			if errors.As(err, &ge) && ge.Line > 0 {
				return nil, fmt.Errorf("%s:%d: %s", s.Name, ge.Line, strings.TrimPrefix(err.Error(), "grpcconfig: "))
			}
			return nil, fmt.Errorf("%s: %v", s.Name, strings.TrimPrefix(err.Error(), "grpcconfig: "))
		}
		if len(cfg.Methods) == 0 {
			return nil, fmt.Errorf("%s: a gRPC service config without methodConfig: calls are sent once, nothing to import", s.Name)
		}
		if n += len(cfg.Methods); n > maxItems {
			return nil, admit(GRPC, n, "methodConfig entries")
		}
		for _, m := range cfg.Methods {
			f := grpcFleet(s.Name, cfg, m)
			p := &prov{file: s.Name, list: f.From, lost: f.Lost}
			if err := grpcEjection(p, &f.Fleet, s.Data); err != nil {
				return nil, fmt.Errorf("%s: %v", s.Name, err)
			}
			f.From, f.Lost = p.list, p.lost
			out.add(f)
		}
	}
	return out.list, nil
}

func grpcFleet(file string, cfg *grpcconfig.Config, m grpcconfig.Method) Fleet {
	path := fmt.Sprintf("methodConfig[%d]", m.Index)
	p := &prov{file: file}
	var names []string
	for _, n := range m.Names {
		if n.Service == "" {
			names = append(names, "every method")
			continue
		}
		names = append(names, strings.TrimSuffix(n.Service+"/"+n.Method, "/"))
	}
	f := scenario.Fleet{Name: strings.Join(names, ", "), Retry: scenario.Retry{Backoff: noBackoff}}
	f.Protocol = scenario.ProtocolGRPC
	p.note("protocol", "grpc", "a service config configures a gRPC channel, which hears a layer below's give-up as a gRPC status")
	if f.Name == "" {
		f.Name = "grpc " + path
	}
	// gRPC has one timeout for the whole call, retries included: it is
	// the deadline, and each attempt may use all that is left of it.
	if m.Timeout > 0 {
		f.Timeout = p.wait("timeout", m.Timeout, 0)
		f.Deadline = f.Timeout
		p.set("timeout", fmtDur(m.Timeout), path+".timeout").and("deadline").by(inParens, "the whole call's")
	} else {
		f.Timeout = maxTimeout
		p.dflt("timeout", "none", path+".timeout", "gRPC: no deadline unless the caller sets one").and("deadline")
		p.lose("no timeout at all: attempts are given %s, the longest the simulator takes; the caller's own deadline is not in the service config", fmtDur(maxTimeout))
	}
	if m.WaitForReady != nil {
		p.lose("waitForReady: the simulator's connections are always ready")
	}
	codes := m.Codes()
	on, unread := grpcOn(codes)
	for _, c := range unread {
		p.lose("retrying %s: the simulator makes no such failure", c)
	}
	if slices.Contains(codes, grpcconfig.DeadlineExceeded) {
		p.lose("DEADLINE_EXCEEDED as retryable: retried when a layer below answers it (a gRPC application whose own deadline passed: retry.on gateway); a call whose own deadline passed is over, and the simulator's timeouts are the client's")
	}
	switch {
	case m.Retry != nil:
		grpcRetry(p, &f, m.Retry, path)
	case m.Hedging != nil:
		grpcHedge(p, &f, m.Hedging, path)
	default:
		p.note("retry.max_retries", "0", "no retryPolicy or hedgingPolicy: the call is sent once")
	}
	switch {
	case len(on) > 0 && len(on) < len(giveup.Kinds):
		f.Retry.On = on
		p.set("retry.on", "["+strings.Join(on, ", ")+"]", path).by(afterSpace, "status codes")
	case len(on) > 0:
		p.set("retry.on", "every failure", path).by(afterSpace, "status codes")
	case m.Hedging != nil:
		// Hedges go out on hedgingDelay whatever the status; without
		// non-fatal codes a failed attempt ends the call (gRFC A6).
		f.Retry.MaxRetries = 0
		p.note("retry.on", "none", path+".hedgingPolicy.nonFatalStatusCodes empty: hedges are sent on the delay, and any failure ends the call")
	default:
		f.Retry.MaxRetries = 0
	}
	grpcThrottle(p, &f, cfg.Throttling)
	return Fleet{Fleet: f, Format: GRPC, File: file, Origin: fmt.Sprintf("%s: %s", file, path), From: p.list, Lost: p.lost, at: place{file: file, path: path}}
}

// grpcRetry maps a method's retryPolicy r (at path) to f's retries and
// backoff.
func grpcRetry(p *prov, f *scenario.Fleet, r *grpcconfig.RetryPolicy, path string) {
	f.Retry.MaxRetries = r.MaxAttempts - 1
	p.set("retry.max_retries", fmt.Sprint(r.MaxAttempts-1), path+".retryPolicy.maxAttempts").by(afterComma, "less the first attempt")
	if r.Requested != r.MaxAttempts {
		p.lose("maxAttempts %d: grpc-go caps it at %d", r.Requested, r.MaxAttempts)
	}
	mult := r.BackoffMultiplier
	if !(mult >= 1 && mult <= 1000) {
		// grpc-go takes any multiplier above 0; the simulator's backoff
		// grows, by at most 1000 times a retry.
		mult = min(max(mult, 1), 1000)
		p.lose("backoffMultiplier %g: the simulator's is from 1 to 1000, and imports it as %g", r.BackoffMultiplier, mult)
	}
	f.Retry.Backoff = scenario.Backoff{Use: "exponential", Base: p.wait("initialBackoff", min(r.InitialBackoff, r.MaxBackoff), 0), Cap: p.wait("maxBackoff", r.MaxBackoff, 0),
		Multiplier: mult, Jitter: "factor", Factor: 0.2}
	p.set("retry.backoff", fmt.Sprintf("exponential from %s by %g, cap %s, jitter 0.8 to 1.2", fmtDur(r.InitialBackoff), r.BackoffMultiplier, fmtDur(r.MaxBackoff)),
		path+".retryPolicy").by(inParens, "grpc-go's formula")
	p.lose("grpc-go jitters the wait past maxBackoff (up to 1.2 times it); the simulator's jitter stays under the cap")
}

// grpcHedge maps a method's hedgingPolicy h (at path) to f's hedge.
func grpcHedge(p *prov, f *scenario.Fleet, h *grpcconfig.HedgingPolicy, path string) {
	f.Hedge = scenario.Hedge{Delay: max(h.HedgingDelay, time.Millisecond), Max: h.MaxAttempts - 1}
	p.set("hedge", fmt.Sprintf("delay %s, max %d", fmtDur(f.Hedge.Delay), f.Hedge.Max), path+".hedgingPolicy")
	if h.HedgingDelay == 0 {
		p.lose("hedgingDelay 0 sends every hedge at once: written as 1ms")
	}
	if f.Hedge.Delay >= f.Timeout {
		p.lose("hedgingDelay %s is not shorter than the call's timeout (%s): no hedge is ever sent, and none is imported", fmtDur(h.HedgingDelay), fmtDur(f.Timeout))
		f.Hedge = scenario.Hedge{}
	}
	p.lose("grpc-go does not hedge (it ignores hedgingPolicy); imported as gRFC A6 specifies")
}

// grpcThrottle maps the service config's retryThrottling t (nil when it
// has none) to f's budget: the budget only of a method that retries or
// hedges.
func grpcThrottle(p *prov, f *scenario.Fleet, t *grpcconfig.Throttling) {
	switch {
	case t != nil && (f.Retry.MaxRetries > 0 || f.Hedge.Delay > 0):
		f.Budget = scenario.Budget{Use: scenario.BudgetGRPC, GRPC: budget.GRPCThrottleSettings{MaxTokens: t.MaxTokens, TokenRatio: min(t.TokenRatio, 1000)}}
		p.set("budget", fmt.Sprintf("grpc, max_tokens %g, token_ratio %g", t.MaxTokens, t.TokenRatio), "retryThrottling")
		if t.TokenRatio < 0.001 {
			// resil counts tokens in thousandths, as gRFC A6 does, and
			// rounds a ratio from 0.0005 up: what it runs is 0.001.
			f.Budget.GRPC.TokenRatio = 0.001
			p.lose("tokenRatio %g counts as token_ratio 0.001: tokens are counted in thousandths (gRFC A6)", t.TokenRatio)
		}
	case t != nil:
		f.Budget = scenario.Budget{Use: scenario.BudgetNone}
		p.note("budget", "none", fmt.Sprintf("retryThrottling (max_tokens %g, token_ratio %g) is set, but this method sends no retry or hedge", t.MaxTokens, t.TokenRatio))
	default:
		f.Budget = scenario.Budget{Use: scenario.BudgetNone}
		p.note("budget", "none", "no retryThrottling")
	}
}

// grpcOn maps retryable status codes to the simulator's failures.
func grpcOn(codes []grpcconfig.Code) (on []string, unread []string) {
	set := map[string]bool{}
	for _, c := range codes {
		switch c {
		case grpcconfig.Unavailable:
			// gRPC reports a refused connection as UNAVAILABLE too.
			set[scenario.RetryOnRejection], set[scenario.RetryOnRefused] = true, true
		case grpcconfig.ResourceExhausted:
			set[scenario.RetryOnRejection] = true
		case grpcconfig.Internal, grpcconfig.Unknown:
			set[scenario.RetryOnError] = true
		case grpcconfig.DeadlineExceeded:
			// An answer DEADLINE_EXCEEDED is a gRPC application below
			// that gave up on its own deadline (package giveup); the
			// caller's own deadline ends the call and is never retried.
			set[scenario.RetryOnGateway] = true
		default:
			unread = append(unread, c.String())
		}
	}
	for _, k := range giveup.Kinds {
		if set[k] {
			on = append(on, k)
		}
	}
	return on, unread
}
