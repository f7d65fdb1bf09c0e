package resilgrpc

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/retrystorm/retrystorm/resil"
)

// DefaultKeyHeader is the metadata key that carries a call's idempotency
// key.
const DefaultKeyHeader = "idempotency-key"

// DefaultReplayLimit is how many bytes of request messages a stream keeps
// to replay on a retry before it commits: grpc-go's default
// (MaxRetryRPCBufferSize).
const DefaultReplayLimit = 256 << 10

// PushbackHeader is the trailer in which a server asks for a delay before
// the next retry, in milliseconds, or for none (a negative value), as gRFC
// A6 specifies.
const PushbackHeader = "grpc-retry-pushback-ms"

// PreviousAttemptsHeader is the metadata key that tells the server how many
// attempts of the call came before this one (gRFC A6). The interceptors set
// it on retries and hedges.
const PreviousAttemptsHeader = "grpc-previous-rpc-attempts"

// DefaultRetryCodes are the status codes retried when Method.RetryCodes is
// nil: UNAVAILABLE, the code that says the request was not processed.
var DefaultRetryCodes = []codes.Code{codes.Unavailable}

// ServerFailureCodes are the status codes that say the server failed:
// UNKNOWN, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE and
// DATA_LOSS. Set Method.FailureCodes to them to count every one against the
// breaker and the budget, retried or not (and choose a failure-rate
// breaker then: a consecutive-failure breaker opens on a server that fails
// a share of its calls with INTERNAL, shedding the answers it gives the
// rest).
var ServerFailureCodes = []codes.Code{codes.Unknown, codes.DeadlineExceeded, codes.ResourceExhausted,
	codes.Internal, codes.Unavailable, codes.DataLoss}

// Method says how calls to one method, or a group of methods, are guarded.
// The zero value guards nothing (Guard is required). A Method is copied by
// NewClient; its functions are called concurrently.
type Method struct {
	// Guard runs the calls: its policy decides retries, hedges (unary
	// calls only), refusals and fallbacks. Required. Share one Guard
	// between methods to share its budget, breaker and counters. Leave its
	// Classify, RetryOn and NoRetryOn unset: the interceptors mark each
	// status for resil's default classification.
	Guard *resil.Guard
	// RetryCodes are the status codes worth another attempt. Nil means
	// DefaultRetryCodes (UNAVAILABLE). Whatever this says,
	// DEADLINE_EXCEEDED of the caller's own deadline is never retried, and
	// one of the per-attempt timeout (GuardSettings.AttemptTimeout) is
	// retried as the Guard retries its timeouts.
	RetryCodes []codes.Code
	// FailureCodes are the status codes that count as the server failing,
	// for the breaker and the budget, though they are not retried. Nil
	// means none: what is retried is what counts as a failure, as gRFC
	// A6's throttle counts only the codes it retries, and as resilhttp's
	// Transport counts statuses. A code in neither list (INTERNAL when
	// only UNAVAILABLE is retried, INVALID_ARGUMENT, NOT_FOUND, ...) is an
	// answer that says nothing about the server's health: it counts as
	// neither success nor failure (resil.Neutral). ServerFailureCodes
	// counts every code that says the server failed.
	FailureCodes []codes.Code
	// Idempotency says whether a call may run more than once. Unset means
	// the Guard's GuardSettings.Idempotency. The call options Idempotent,
	// NotIdempotent and WithKey override it for one call; see also
	// ProtoIdempotency.
	Idempotency resil.Idempotency
	// Timeout bounds each call, retries included (a service config's
	// timeout). Zero means none; a caller's earlier deadline wins.
	Timeout time.Duration
	// WaitForReady sends every attempt with grpc.WaitForReady(true): it
	// waits for a connection instead of failing at once.
	WaitForReady bool
	// Fallback, if set, answers a unary call that the breaker refuses (or
	// whose retry it refuses): it may fill reply and return nil. err wraps
	// resil.ErrBreakerOpen. Nil means the Guard's GuardSettings.Fallback,
	// if any. Streams are not given a fallback.
	Fallback func(ctx context.Context, method string, req, reply any, err error) error
}

// ClientSettings configures a [Client]. The zero value guards no method:
// every call passes through untouched.
type ClientSettings struct {
	// Default guards the methods that Methods does not name. With a nil
	// Guard, those calls pass through untouched.
	Default Method
	// Methods guard the methods they name: "/package.Service/Method", or
	// "/package.Service/" for every method of the service. A call takes its
	// method's entry, else its service's, else Default, as gRPC matches
	// service config names.
	Methods map[string]Method
	// KeyHeader is the metadata key that carries idempotency keys. Empty
	// means DefaultKeyHeader.
	KeyHeader string
	// ReplayLimit is how many bytes of request messages a stream keeps to
	// replay on a retry; past it the stream commits to its attempt and is
	// no longer retried (gRFC A6). Zero means DefaultReplayLimit. Messages
	// that are not protocol buffers have no known size and commit the
	// stream at once.
	ReplayLimit int
}

// Client holds the client interceptors. Make one with [NewClient]; the
// zero value is not usable. A Client is safe for concurrent use.
type Client struct {
	def     *method
	methods map[string]*method
	key     string
	replay  int
}

// method is a Method made ready: code sets as bit masks.
type method struct {
	guard    *resil.Guard
	retry    uint64
	fail     uint64
	idem     resil.Idempotency
	timeout  time.Duration
	wfr      bool
	hedges   bool
	fallback func(ctx context.Context, method string, req, reply any, err error) error
}

// NewClient returns a Client, or an error naming the invalid setting.
func NewClient(s ClientSettings) (*Client, error) {
	c := &Client{key: s.KeyHeader, replay: s.ReplayLimit, methods: make(map[string]*method, len(s.Methods))}
	if c.key == "" {
		c.key = DefaultKeyHeader
	}
	if c.key != strings.ToLower(c.key) || strings.HasPrefix(c.key, "grpc-") || strings.HasSuffix(c.key, "-bin") {
		return nil, fmt.Errorf("resilgrpc: ClientSettings.KeyHeader %q: must be lower case, not grpc- reserved, not binary", c.key)
	}
	if c.replay == 0 {
		c.replay = DefaultReplayLimit
	}
	if c.replay < 0 {
		return nil, fmt.Errorf("resilgrpc: ClientSettings.ReplayLimit = %d: must not be negative", c.replay)
	}
	if s.Default.Guard != nil || !isZero(s.Default) {
		m, err := newMethod("ClientSettings.Default", s.Default)
		if err != nil {
			return nil, err
		}
		c.def = m
	}
	for name, mm := range s.Methods {
		if !validName(name) {
			return nil, fmt.Errorf("resilgrpc: ClientSettings.Methods[%q]: want \"/package.Service/Method\" or \"/package.Service/\"", name)
		}
		m, err := newMethod(fmt.Sprintf("ClientSettings.Methods[%q]", name), mm)
		if err != nil {
			return nil, err
		}
		c.methods[name] = m
	}
	return c, nil
}

func isZero(m Method) bool {
	return m.Guard == nil && m.RetryCodes == nil && m.FailureCodes == nil && m.Idempotency == 0 &&
		m.Timeout == 0 && !m.WaitForReady && m.Fallback == nil
}

func newMethod(field string, m Method) (*method, error) {
	if m.Guard == nil {
		return nil, fmt.Errorf("resilgrpc: %s.Guard is required", field)
	}
	if m.Timeout < 0 {
		return nil, fmt.Errorf("resilgrpc: %s.Timeout = %v: must not be negative", field, m.Timeout)
	}
	if m.Idempotency > resil.NotIdempotent {
		return nil, fmt.Errorf("resilgrpc: %s.Idempotency = %v: unknown", field, m.Idempotency)
	}
	retry, fail := m.RetryCodes, m.FailureCodes
	if retry == nil {
		retry = DefaultRetryCodes
	}
	out := &method{guard: m.Guard, idem: m.Idempotency, timeout: m.Timeout, wfr: m.WaitForReady,
		fallback: m.Fallback, hedges: m.Guard.Policy().Hedge.Delay > 0}
	for _, x := range []struct {
		name  string
		list  []codes.Code
		mask  *uint64
		label string
	}{{"RetryCodes", retry, &out.retry, "retried"}, {"FailureCodes", fail, &out.fail, "counted as failures"}} {
		for _, code := range x.list {
			if code == codes.OK || code > 63 {
				return nil, fmt.Errorf("resilgrpc: %s.%s: %v cannot be %s", field, x.name, code, x.label)
			}
			*x.mask |= 1 << code
		}
	}
	// A retried code is a failure of the server.
	out.fail |= out.retry
	return out, nil
}

// lookup returns the entry for fullMethod, nil when it is not guarded.
func (c *Client) lookup(fullMethod string) *method {
	if m, ok := match(c.methods, fullMethod); ok {
		return m
	}
	return c.def
}

// match returns the entry of names for fullMethod: the method's own
// ("/package.Service/Method"), else its service's ("/package.Service/"), as
// gRPC matches service config names.
func match[T any](names map[string]T, fullMethod string) (T, bool) {
	if len(names) > 0 {
		if v, ok := names[fullMethod]; ok {
			return v, true
		}
		if k := strings.LastIndexByte(fullMethod, '/'); k > 0 {
			if v, ok := names[fullMethod[:k+1]]; ok {
				return v, true
			}
		}
	}
	var zero T
	return zero, false
}

// validName reports whether name is "/package.Service/Method" or
// "/package.Service/".
func validName(name string) bool {
	return strings.HasPrefix(name, "/") && !strings.HasPrefix(name, "//") && strings.Count(name, "/") == 2
}

// DialOptions returns the options that install both interceptors, and turn
// grpc-go's built-in retries off (grpc.WithDisableRetry): retries inside
// each attempt would multiply with the Guard's, outside its budget.
func (c *Client) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(c.UnaryInterceptor()),
		grpc.WithChainStreamInterceptor(c.StreamInterceptor()),
		grpc.WithDisableRetry(),
	}
}

// UnaryInterceptor returns the unary client interceptor: each call runs
// under its method's Guard, with retries, hedges and the breaker.
//
// A hedge decodes into a reply of its own (a new message of the reply's
// type) and the winner is merged into the caller's reply, so attempts never
// write the same message at once.
func (c *Client) UnaryInterceptor() grpc.UnaryClientInterceptor { return c.unary }

// CallOption is a per-call option of the interceptors, passed among a
// call's grpc.CallOptions; make one with [Idempotent], [NotIdempotent],
// [WithKey] or [Once]. gRPC itself ignores it.
type CallOption struct {
	grpc.EmptyCallOption
	idem resil.Idempotency
	key  string
	once bool
}

// Idempotent declares that this call may run more than once: it may be
// retried and hedged.
func Idempotent() CallOption { return CallOption{idem: resil.Idempotent} }

// NotIdempotent declares that this call must not run twice: it is sent
// once unless it carries a key ([WithKey]).
func NotIdempotent() CallOption { return CallOption{idem: resil.NotIdempotent} }

// WithKey gives the call an idempotency key, sent with every attempt in the
// KeyHeader metadata: the server deduplicates by it, so a non-idempotent
// call with a key may be retried.
func WithKey(key string) CallOption { return CallOption{key: key} }

// Once sends a single attempt: no retry, no hedge.
func Once() CallOption { return CallOption{once: true} }

// readOptions applies the interceptors' call options.
func readOptions[T any](opts []grpc.CallOption, o *resil.CallOptions[T]) {
	for _, x := range opts {
		co, ok := x.(CallOption)
		if !ok {
			continue
		}
		if co.idem != resil.IdempotencyUnset {
			o.Idempotency = co.idem
		}
		if co.key != "" {
			o.Key = co.key
		}
		if co.once {
			o.Once = true
		}
	}
}

func (c *Client) unary(ctx context.Context, fullMethod string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	m := c.lookup(fullMethod)
	if m == nil {
		return invoker(ctx, fullMethod, req, reply, cc, opts...)
	}
	if m.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, m.timeout)
		defer cancel()
	}
	o := resil.CallOptions[any]{Idempotency: m.idem}
	readOptions(opts, &o)
	if m.hedges && !canRenew(reply) {
		o.NoHedge = true // attempts side by side need replies of their own
	}
	if m.fallback != nil {
		o.Fallback = func(ctx context.Context, err error) (any, error) {
			return reply, m.fallback(ctx, fullMethod, req, reply, err)
		}
	}
	n := len(opts)
	send := func(actx context.Context, a resil.Attempt) (any, error) {
		into := reply
		if a.Kind == resil.KindHedge {
			into = renew(reply)
		}
		sctx := c.outgoing(actx, a)
		var hdr, trl metadata.MD
		all := make([]grpc.CallOption, n, n+3)
		copy(all, opts)
		all = append(all, grpc.Header(&hdr), grpc.Trailer(&trl))
		if m.wfr {
			all = append(all, grpc.WaitForReady(true))
		}
		err := invoker(sctx, fullMethod, req, into, cc, all...)
		if err == nil {
			return into, nil
		}
		// Headers before the error commit the call (gRFC A6): grpc.Header
		// leaves hdr nil for a trailers-only answer.
		return into, m.judge(ctx, actx, err, hdr != nil, trl)
	}
	v, err := resil.CallWith(ctx, m.guard, o, send)
	if err != nil {
		return toCallError(err)
	}
	if v != reply && v != nil {
		merge(reply, v)
	}
	return nil
}

// outgoing adds the attempt's metadata (the count of attempts before it,
// and the idempotency key) and the attempt itself, for AttemptOf.
func (c *Client) outgoing(ctx context.Context, a resil.Attempt) context.Context {
	ctx = context.WithValue(ctx, attemptKey{}, a)
	switch {
	case a.Number > 1 && a.Key != "":
		return metadata.AppendToOutgoingContext(ctx, PreviousAttemptsHeader, strconv.Itoa(a.Number-1), c.key, a.Key)
	case a.Number > 1:
		return metadata.AppendToOutgoingContext(ctx, PreviousAttemptsHeader, strconv.Itoa(a.Number-1))
	case a.Key != "":
		return metadata.AppendToOutgoingContext(ctx, c.key, a.Key)
	}
	return ctx
}

type attemptKey struct{}

// AttemptOf returns the attempt a call is sent as, from the context the
// interceptors hand what comes after them (the next interceptor of the
// chain, the invoker or the streamer): its number, its kind (first, retry
// or hedge) and its idempotency key. An interceptor installed after the
// Client's (an inner one, such as one that counts what reaches the wire)
// reads it there. ok is false for a context no Client made.
func AttemptOf(ctx context.Context) (a resil.Attempt, ok bool) {
	a, ok = ctx.Value(attemptKey{}).(resil.Attempt)
	return a, ok
}

// canRenew reports whether renew can make a fresh reply of reply's type.
func canRenew(reply any) bool {
	if _, ok := reply.(proto.Message); ok {
		return true
	}
	v := reflect.ValueOf(reply)
	return v.Kind() == reflect.Pointer && !v.IsNil()
}

// renew returns a new, empty message of reply's type.
func renew(reply any) any {
	if m, ok := reply.(proto.Message); ok {
		return m.ProtoReflect().New().Interface()
	}
	return reflect.New(reflect.TypeOf(reply).Elem()).Interface()
}

// merge makes dst the winning hedge's reply src.
func merge(dst, src any) {
	if d, ok := dst.(proto.Message); ok {
		proto.Reset(d)
		proto.Merge(d, src.(proto.Message))
		return
	}
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src).Elem())
}

// ProtoIdempotency reads a method's idempotency from its protocol buffer
// definition (option idempotency_level), in the registry of the generated
// code linked into the program: NO_SIDE_EFFECTS and IDEMPOTENT make it
// resil.Idempotent, IDEMPOTENCY_UNKNOWN resil.NotIdempotent. ok is false
// when the method is not registered.
func ProtoIdempotency(fullMethod string) (i resil.Idempotency, ok bool) {
	return protoIdempotency(fullMethod)
}
