// Package grpcconfig reads the retry part of a gRPC service config (JSON)
// into plain Go values, and builds resil policies from them with the meaning
// grpc-go gives them, so that a team can move from gRPC's built-in retries to
// resil without changing behaviour, then add a budget or a breaker.
//
// It imports the standard library and resil only, never gRPC: the
// interceptors of resil/resilgrpc use it, and so does retrystorm's importer,
// which turns a service config into simulated fleets without linking gRPC.
//
// # What is read
//
// methodConfig[].name, timeout, waitForReady, retryPolicy {maxAttempts,
// initialBackoff, maxBackoff, backoffMultiplier, retryableStatusCodes},
// hedgingPolicy {maxAttempts, hedgingDelay, nonFatalStatusCodes}, and
// retryThrottling {maxTokens, tokenRatio}. Keys match without regard to case,
// as grpc-go's encoding/json reads them ("MaxAttempts" works). Keys of the
// service config that are not about retries (loadBalancingConfig,
// healthCheckConfig, maxRequestMessageBytes, ...) are accepted and ignored;
// any other key is an error, so a misspelt "retryPolicies" is not silently
// dropped.
//
// # The meaning, as grpc-go gives it
//
//   - maxAttempts counts the first attempt; values above the client's cap
//     (5 unless [Options.MaxAttempts] says otherwise, as grpc-go's
//     WithMaxCallAttempts) are lowered to it. Below 2 is an error.
//   - The wait before retry n (from 0) is min(initialBackoff ×
//     backoffMultiplier^n, maxBackoff) × uniform(0.8, 1.2): grpc-go's
//     formula. (gRFC A6's text says uniform(0, ...); grpc-go is what runs.)
//     A server's pushback replaces it and restarts the schedule.
//   - retryThrottling is one bucket per channel: it starts at maxTokens; a
//     failed attempt whose code is retryable (or non-fatal) takes one token,
//     a successful call adds tokenRatio; retries and hedges go only while the
//     balance is above maxTokens/2. That is [budget.GRPCThrottle].
//   - timeout bounds the whole call, retries included; waitForReady is
//     passed to every attempt.
//   - Names match as gRPC matches them: "/service/method" first, then the
//     service's entry, then the entry whose name is empty (the default).
//
// grpc-go ignores hedgingPolicy (it does not hedge); this package reads it as
// gRFC A6 specifies, and resil hedges under the same throttle.
package grpcconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultMaxAttempts is the client's cap on maxAttempts, as in grpc-go and
// gRFC A6: a service config asking for more gets this many.
const DefaultMaxAttempts = 5

// MaxSize is the largest service config Parse reads, in bytes. Real ones are
// a few kilobytes; the cap bounds what a hostile one can cost.
const MaxSize = 1 << 20

// maxEntries bounds methodConfig entries and names: far above real configs,
// low enough that lookups stay cheap.
const maxEntries = 10_000

// Options tunes [Parse]. The zero value reads as grpc-go does by default.
type Options struct {
	// MaxAttempts is the client's cap on maxAttempts (retry and hedging).
	// Zero means DefaultMaxAttempts. grpc-go's WithMaxCallAttempts sets
	// the same cap; a value below 2 there means 5, here it is an error.
	MaxAttempts int
}

// Config is the retry part of a service config. The zero Config has no
// method entries and no throttling: calls are sent once. A Config is a
// plain value; it is safe for concurrent reads.
type Config struct {
	// Methods are the methodConfig entries, in the file's order.
	Methods []Method
	// Throttling is retryThrottling; nil when absent.
	Throttling *Throttling

	byName map[string]int // "/service/method", "/service/" or "": index in Methods
}

// Name is one entry of a methodConfig's name list. An empty Service (and
// Method) is the default entry for every method; an empty Method is the
// entry for every method of Service.
type Name struct {
	Service string
	Method  string
}

// Path returns the name as gRPC keys it: "/service/method", "/service/" or
// "" for the default entry.
func (n Name) Path() string {
	if n.Service == "" {
		return ""
	}
	return "/" + n.Service + "/" + n.Method
}

// Method is one methodConfig entry.
type Method struct {
	// Names are the methods it applies to.
	Names []Name
	// Timeout bounds each call, retries included. Zero means none.
	Timeout time.Duration
	// WaitForReady is the entry's waitForReady; nil when absent.
	WaitForReady *bool
	// Retry is the retryPolicy; nil when absent.
	Retry *RetryPolicy
	// Hedging is the hedgingPolicy; nil when absent. At most one of Retry
	// and Hedging is set.
	Hedging *HedgingPolicy
	// Index is the entry's place in methodConfig, for messages.
	Index int
}

// RetryPolicy is a methodConfig's retryPolicy, validated.
type RetryPolicy struct {
	// MaxAttempts counts the first attempt, capped at Options.MaxAttempts.
	MaxAttempts int
	// Requested is maxAttempts as written, before the cap.
	Requested int
	// InitialBackoff, MaxBackoff and BackoffMultiplier shape the wait
	// before each retry: min(InitialBackoff × BackoffMultiplier^n,
	// MaxBackoff) × uniform(0.8, 1.2).
	InitialBackoff    time.Duration
	MaxBackoff        time.Duration
	BackoffMultiplier float64
	// RetryableStatusCodes are the codes worth another attempt, in the
	// file's order, without duplicates.
	RetryableStatusCodes []Code
}

// HedgingPolicy is a methodConfig's hedgingPolicy, validated.
type HedgingPolicy struct {
	// MaxAttempts counts the first attempt, capped at Options.MaxAttempts.
	MaxAttempts int
	// Requested is maxAttempts as written, before the cap.
	Requested int
	// HedgingDelay is the wait before each hedge; zero sends them all at
	// once.
	HedgingDelay time.Duration
	// NonFatalStatusCodes are the codes after which the other attempts go
	// on; any other failure ends the call.
	NonFatalStatusCodes []Code
}

// Throttling is the service config's retryThrottling.
type Throttling struct {
	// MaxTokens is the bucket's size and start, in (0, 1000].
	MaxTokens float64
	// TokenRatio is what a successful call adds: at least 0.001; three
	// decimals count, as gRFC A6 says.
	TokenRatio float64
}

// Code is a gRPC status code, with the numbers of the gRPC specification
// (the values of google.golang.org/grpc/codes.Code).
type Code uint32

// The status codes this package names.
const (
	OK                 Code = 0
	Canceled           Code = 1
	Unknown            Code = 2
	InvalidArgument    Code = 3
	DeadlineExceeded   Code = 4
	NotFound           Code = 5
	AlreadyExists      Code = 6
	PermissionDenied   Code = 7
	ResourceExhausted  Code = 8
	FailedPrecondition Code = 9
	Aborted            Code = 10
	OutOfRange         Code = 11
	Unimplemented      Code = 12
	Internal           Code = 13
	Unavailable        Code = 14
	DataLoss           Code = 15
	Unauthenticated    Code = 16
)

var codeNames = [...]string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
	"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}

// String returns the code's name as a service config spells it
// ("UNAVAILABLE"), or "Code(n)".
func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "Code(" + strconv.FormatUint(uint64(c), 10) + ")"
}

// Error is a service config that Parse refuses. Path names the JSON value
// ("methodConfig[1].retryPolicy.maxAttempts"); Line and Column place a
// syntax error (zero otherwise).
type Error struct {
	Path   string
	Line   int
	Column int
	Reason string
}

// Error returns "grpcconfig: PATH: REASON".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("grpcconfig: ")
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d, column %d: ", e.Line, e.Column)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

func fail(path, format string, a ...any) error {
	return &Error{Path: path, Reason: fmt.Sprintf(format, a...)}
}

// Parse reads a service config. It returns an *Error naming the JSON path of
// the first value it cannot honour: a syntax error, a key it does not know, a
// value grpc-go would refuse, or one resil cannot mean the same way (a
// backoffMultiplier below 1).
func Parse(data []byte, o Options) (*Config, error) {
	capN := o.MaxAttempts
	if capN == 0 {
		capN = DefaultMaxAttempts
	}
	if capN < 2 || capN > 100 {
		return nil, fail("", "Options.MaxAttempts = %d: must be in [2, 100], or zero for %d", o.MaxAttempts, DefaultMaxAttempts)
	}
	if len(data) > MaxSize {
		return nil, fail("", "%d bytes: a service config may hold at most %d", len(data), MaxSize)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fail("", "empty: a service config is a JSON object")
	}
	if !json.Valid(data) {
		return nil, syntaxError(data)
	}
	top, err := object("", data, topKeys)
	if err != nil {
		return nil, err
	}
	c := &Config{byName: map[string]int{}}
	if raw, ok := top["retrythrottling"]; ok && !isNull(raw) {
		t, err := throttling("retryThrottling", raw)
		if err != nil {
			return nil, err
		}
		c.Throttling = t
	}
	raw, ok := top["methodconfig"]
	if !ok || isNull(raw) {
		return c, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fail("methodConfig", "must be a list of objects")
	}
	if len(list) > maxEntries {
		return nil, fail("methodConfig", "%d entries: at most %d", len(list), maxEntries)
	}
	seen := map[string]string{}
	names := 0
	for i, raw := range list {
		path := fmt.Sprintf("methodConfig[%d]", i)
		m, err := method(path, raw, capN)
		if err != nil {
			return nil, err
		}
		m.Index = i
		names += len(m.Names)
		if names > maxEntries {
			return nil, fail(path+".name", "more than %d names in all", maxEntries)
		}
		for j, n := range m.Names {
			p := n.Path()
			if prev, dup := seen[p]; dup {
				return nil, fail(fmt.Sprintf("%s.name[%d]", path, j), "%s is already named at %s", describe(n), prev)
			}
			seen[p] = fmt.Sprintf("%s.name[%d]", path, j)
			c.byName[p] = len(c.Methods)
		}
		c.Methods = append(c.Methods, m)
	}
	return c, nil
}

func describe(n Name) string {
	if n.Service == "" {
		return "the default entry"
	}
	if n.Method == "" {
		return "service " + strconv.Quote(n.Service)
	}
	return "method " + strconv.Quote(n.Path())
}

// Lookup returns the entry that applies to fullMethod ("/package.Service/
// Method", as gRPC passes it to interceptors), matched as gRPC matches: the
// method's own entry, then its service's, then the default. It returns nil
// when none applies: the call is sent once.
func (c *Config) Lookup(fullMethod string) *Method {
	if c == nil || len(c.Methods) == 0 {
		return nil
	}
	if i, ok := c.byName[fullMethod]; ok {
		return &c.Methods[i]
	}
	if k := strings.LastIndexByte(fullMethod, '/'); k >= 0 {
		if i, ok := c.byName[fullMethod[:k+1]]; ok {
			return &c.Methods[i]
		}
	}
	if i, ok := c.byName[""]; ok {
		return &c.Methods[i]
	}
	return nil
}

// Codes returns the status codes after which the method may send another
// attempt: the retry policy's retryable codes, or the hedging policy's
// non-fatal ones; nil when it has neither.
func (m *Method) Codes() []Code {
	switch {
	case m == nil:
		return nil
	case m.Retry != nil:
		return m.Retry.RetryableStatusCodes
	case m.Hedging != nil:
		return m.Hedging.NonFatalStatusCodes
	}
	return nil
}

var (
	topKeys = keys("methodConfig", "retryThrottling",
		"loadBalancingPolicy", "loadBalancingConfig", "healthCheckConfig")
	methodKeys = keys("name", "timeout", "waitForReady", "retryPolicy", "hedgingPolicy",
		"maxRequestMessageBytes", "maxResponseMessageBytes")
	nameKeys       = keys("service", "method")
	retryKeys      = keys("maxAttempts", "initialBackoff", "maxBackoff", "backoffMultiplier", "retryableStatusCodes")
	hedgeKeys      = keys("maxAttempts", "hedgingDelay", "nonFatalStatusCodes")
	throttlingKeys = keys("maxTokens", "tokenRatio")
)

// keyset maps a lower-cased key to its spelling in the gRPC documentation.
type keyset map[string]string

func keys(names ...string) keyset {
	k := keyset{}
	for _, n := range names {
		k[strings.ToLower(n)] = n
	}
	return k
}

// object decodes a JSON object whose keys must be in allowed (without regard
// to case, as encoding/json matches them), keyed by the lower-cased key.
func object(path string, raw json.RawMessage, allowed keyset) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fail(orTop(path), "must be a JSON object")
	}
	out := make(map[string]json.RawMessage, len(m))
	spelt := make(map[string]string, len(m))
	// In a fixed order, so that the error names the same key every time.
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		lk := strings.ToLower(k)
		if _, ok := allowed[lk]; !ok {
			return nil, fail(join(path, k), "unknown key; %s", expected(k, allowed))
		}
		if other, dup := spelt[lk]; dup {
			// Which would win is not defined: refuse both.
			a, b := min(k, other), max(k, other)
			return nil, fail(join(path, a), "given twice, as %q and %q (keys match without regard to case)", a, b)
		}
		out[lk], spelt[lk] = v, k
	}
	return out, nil
}

func orTop(path string) string {
	if path == "" {
		return "(top)"
	}
	return path
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// expected lists the known keys, and names the one meant when k is a
// snake_case spelling of it ("max_attempts").
func expected(k string, allowed keyset) string {
	if want, ok := allowed[strings.ReplaceAll(strings.ToLower(k), "_", "")]; ok {
		return "did you mean " + strconv.Quote(want) + "?"
	}
	names := make([]string, 0, len(allowed))
	for _, v := range allowed {
		names = append(names, v)
	}
	slices.Sort(names)
	return "expected one of " + strings.Join(names, ", ")
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func method(path string, raw json.RawMessage, capN int) (Method, error) {
	var m Method
	f, err := object(path, raw, methodKeys)
	if err != nil {
		return m, err
	}
	nraw, ok := f["name"]
	if !ok || isNull(nraw) {
		return m, fail(path+".name", "required: the methods this entry applies to ([{}] for every method)")
	}
	var list []json.RawMessage
	if err := json.Unmarshal(nraw, &list); err != nil {
		return m, fail(path+".name", "must be a list of {service, method} objects")
	}
	if len(list) == 0 {
		return m, fail(path+".name", "empty: the entry would apply to no method ([{}] is every method)")
	}
	if len(list) > maxEntries {
		return m, fail(path+".name", "%d names: at most %d", len(list), maxEntries)
	}
	for j, r := range list {
		np := fmt.Sprintf("%s.name[%d]", path, j)
		nf, err := object(np, r, nameKeys)
		if err != nil {
			return m, err
		}
		var n Name
		if n.Service, err = str(np+".service", nf["service"]); err != nil {
			return m, err
		}
		if n.Method, err = str(np+".method", nf["method"]); err != nil {
			return m, err
		}
		if n.Service == "" && n.Method != "" {
			return m, fail(np, "a method needs its service (an empty service is the default entry)")
		}
		if strings.ContainsRune(n.Service, '/') || strings.ContainsRune(n.Method, '/') {
			return m, fail(np, "service and method names hold no '/'")
		}
		m.Names = append(m.Names, n)
	}
	if r, ok := f["timeout"]; ok && !isNull(r) {
		d, err := duration(path+".timeout", r)
		if err != nil {
			return m, err
		}
		if d <= 0 {
			return m, fail(path+".timeout", "must be positive (grpc-go fails every call at once with %s)", r)
		}
		m.Timeout = d
	}
	if r, ok := f["waitforready"]; ok && !isNull(r) {
		var b bool
		if err := json.Unmarshal(r, &b); err != nil {
			return m, fail(path+".waitForReady", "must be true or false")
		}
		m.WaitForReady = &b
	}
	rr, hasRetry := f["retrypolicy"]
	hr, hasHedge := f["hedgingpolicy"]
	hasRetry = hasRetry && !isNull(rr)
	hasHedge = hasHedge && !isNull(hr)
	if hasRetry && hasHedge {
		return m, fail(path, "retryPolicy and hedgingPolicy are exclusive (gRFC A6): keep one")
	}
	if hasRetry {
		if m.Retry, err = retryPolicy(path+".retryPolicy", rr, capN); err != nil {
			return m, err
		}
	}
	if hasHedge {
		if m.Hedging, err = hedgingPolicy(path+".hedgingPolicy", hr, capN); err != nil {
			return m, err
		}
	}
	return m, nil
}

func retryPolicy(path string, raw json.RawMessage, capN int) (*RetryPolicy, error) {
	f, err := object(path, raw, retryKeys)
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"maxAttempts", "initialBackoff", "maxBackoff", "backoffMultiplier", "retryableStatusCodes"} {
		if r, ok := f[strings.ToLower(k)]; !ok || isNull(r) {
			return nil, fail(path+"."+k, "required")
		}
	}
	p := &RetryPolicy{}
	if p.Requested, err = attempts(path+".maxAttempts", f["maxattempts"]); err != nil {
		return nil, err
	}
	p.MaxAttempts = min(p.Requested, capN)
	if p.InitialBackoff, err = positive(path+".initialBackoff", f["initialbackoff"]); err != nil {
		return nil, err
	}
	if p.MaxBackoff, err = positive(path+".maxBackoff", f["maxbackoff"]); err != nil {
		return nil, err
	}
	mp := path + ".backoffMultiplier"
	var mult float64
	if err := json.Unmarshal(f["backoffmultiplier"], &mult); err != nil {
		return nil, fail(mp, "must be a number")
	}
	switch {
	case !(mult > 0) || math.IsInf(mult, 0):
		return nil, fail(mp, "must be positive, got %v", mult)
	case mult < 1:
		return nil, fail(mp, "%v: a backoff that shrinks; resil's backoff grows by a multiplier in [1, 1000]", mult)
	case mult > 1000:
		return nil, fail(mp, "%v: resil's backoff grows by a multiplier in [1, 1000]", mult)
	}
	p.BackoffMultiplier = mult
	if p.RetryableStatusCodes, err = codeList(path+".retryableStatusCodes", f["retryablestatuscodes"], true); err != nil {
		return nil, err
	}
	return p, nil
}

func hedgingPolicy(path string, raw json.RawMessage, capN int) (*HedgingPolicy, error) {
	f, err := object(path, raw, hedgeKeys)
	if err != nil {
		return nil, err
	}
	if r, ok := f["maxattempts"]; !ok || isNull(r) {
		return nil, fail(path+".maxAttempts", "required")
	}
	p := &HedgingPolicy{}
	if p.Requested, err = attempts(path+".maxAttempts", f["maxattempts"]); err != nil {
		return nil, err
	}
	p.MaxAttempts = min(p.Requested, capN)
	if r, ok := f["hedgingdelay"]; ok && !isNull(r) {
		d, err := duration(path+".hedgingDelay", r)
		if err != nil {
			return nil, err
		}
		if d < 0 {
			return nil, fail(path+".hedgingDelay", "must not be negative")
		}
		p.HedgingDelay = d
	}
	if r, ok := f["nonfatalstatuscodes"]; ok && !isNull(r) {
		if p.NonFatalStatusCodes, err = codeList(path+".nonFatalStatusCodes", r, false); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func throttling(path string, raw json.RawMessage) (*Throttling, error) {
	f, err := object(path, raw, throttlingKeys)
	if err != nil {
		return nil, err
	}
	t := &Throttling{}
	for _, x := range []struct {
		key string
		v   *float64
	}{{"maxTokens", &t.MaxTokens}, {"tokenRatio", &t.TokenRatio}} {
		r, ok := f[strings.ToLower(x.key)]
		if !ok || isNull(r) {
			return nil, fail(path+"."+x.key, "required")
		}
		if err := json.Unmarshal(r, x.v); err != nil {
			return nil, fail(path+"."+x.key, "must be a number")
		}
	}
	if !(t.MaxTokens > 0 && t.MaxTokens <= 1000) {
		return nil, fail(path+".maxTokens", "must be in (0, 1000], got %v", t.MaxTokens)
	}
	if !(t.TokenRatio > 0) || math.IsInf(t.TokenRatio, 0) {
		return nil, fail(path+".tokenRatio", "must be positive, got %v", t.TokenRatio)
	}
	if t.TokenRatio < 0.0005 {
		return nil, fail(path+".tokenRatio", "%v: resil counts tokens in thousandths, as gRFC A6 does; at least 0.001", t.TokenRatio)
	}
	return t, nil
}

// attempts reads a maxAttempts: an integer of at least 2.
func attempts(path string, raw json.RawMessage) (int, error) {
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, fail(path, "must be a number")
	}
	if f != math.Trunc(f) {
		return 0, fail(path, "must be a whole number, got %v", f)
	}
	if f < 2 {
		return 0, fail(path, "must be 2 or more (it counts the first attempt), got %v", f)
	}
	return int(min(f, 1e6)), nil
}

func positive(path string, raw json.RawMessage) (time.Duration, error) {
	d, err := duration(path, raw)
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, fail(path, "must be positive, got %s", raw)
	}
	return d, nil
}

func str(path string, raw json.RawMessage) (string, error) {
	if raw == nil || isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fail(path, "must be a string")
	}
	return s, nil
}

// maxProtoSeconds is the largest google.protobuf.Duration.
const maxProtoSeconds = 315_576_000_000

// duration reads a google.protobuf.Duration in its JSON form: a string of
// seconds with up to nine decimals and the suffix "s" ("0.1s", "2s", ".5s").
// Values beyond time.Duration saturate, as grpc-go's do.
func duration(path string, raw json.RawMessage) (time.Duration, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fail(path, "must be a string such as \"0.1s\"")
	}
	bad := func(why string) (time.Duration, error) {
		return 0, fail(path, "%q: %s; a duration is seconds with the suffix s, such as \"0.1s\"", s, why)
	}
	body, ok := strings.CutSuffix(s, "s")
	if !ok {
		return bad("no unit s")
	}
	neg := strings.HasPrefix(body, "-")
	body = strings.TrimPrefix(body, "-")
	whole, frac, _ := strings.Cut(body, ".")
	if whole == "" && frac == "" {
		return bad("no digits")
	}
	if !digits(whole) || !digits(frac) || strings.Contains(frac, ".") {
		return bad("not a number")
	}
	if len(frac) > 9 {
		return bad("more than nine decimals")
	}
	var sec, ns int64
	if whole != "" {
		v, err := strconv.ParseInt(whole, 10, 64)
		if err != nil || v > maxProtoSeconds {
			return bad("out of range")
		}
		sec = v
	}
	if frac != "" {
		v, _ := strconv.ParseInt(frac, 10, 64)
		for range 9 - len(frac) {
			v *= 10
		}
		ns = v
	}
	var d time.Duration
	if sec > (math.MaxInt64-ns)/int64(time.Second) {
		d = math.MaxInt64
	} else {
		d = time.Duration(sec)*time.Second + time.Duration(ns)
	}
	if neg {
		d = -d
	}
	return d, nil
}

func digits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// codeList reads status codes: names ("UNAVAILABLE") or numbers (14), as
// grpc-go accepts them. OK is refused: it is never a failure.
func codeList(path string, raw json.RawMessage, required bool) ([]Code, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fail(path, "must be a list of status codes such as \"UNAVAILABLE\"")
	}
	if required && len(list) == 0 {
		return nil, fail(path, "empty: name at least one code, such as \"UNAVAILABLE\"")
	}
	if len(list) > 100 {
		return nil, fail(path, "%d codes: there are 17", len(list))
	}
	var out []Code
	for i, r := range list {
		cp := fmt.Sprintf("%s[%d]", path, i)
		c, err := code(cp, r)
		if err != nil {
			return nil, err
		}
		if c == OK {
			return nil, fail(cp, "OK is a success, never retried: remove it")
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

func code(path string, raw json.RawMessage) (Code, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		for i, n := range codeNames {
			if n == s {
				return Code(i), nil
			}
		}
		if up := strings.ToUpper(s); up != s && slices.Contains(codeNames[:], up) {
			return 0, fail(path, "unknown status code %q; did you mean %q? (names are upper case)", s, up)
		}
		return 0, fail(path, "unknown status code %q; expected a name such as \"UNAVAILABLE\"", s)
	}
	var n float64
	if err := json.Unmarshal(raw, &n); err != nil || n != math.Trunc(n) || n < 0 || n >= float64(len(codeNames)) {
		return 0, fail(path, "must be a status code name such as \"UNAVAILABLE\", or a number from 0 to 16")
	}
	return Code(n), nil
}

// syntaxError places the first syntax error in data.
func syntaxError(data []byte) error {
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return fail("", "not JSON: %v", err)
	}
	off := int(min(max(se.Offset-1, 0), int64(len(data))))
	line := 1 + bytes.Count(data[:off], []byte{'\n'})
	col := off - bytes.LastIndexByte(data[:off], '\n')
	return &Error{Line: line, Column: col, Reason: "not JSON: " + se.Error()}
}
