package grpcconfig

import (
	"errors"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/internal/servertest"
	"github.com/retrystorm/retrystorm/resil"
	"github.com/retrystorm/retrystorm/resil/budget"
)

const full = `{
  "loadBalancingConfig": [{"round_robin": {}}],
  "methodConfig": [
    {"name": [{"service": "echo.Echo", "method": "Say"}],
     "timeout": "2.5s", "waitForReady": true,
     "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.1s", "maxBackoff": "1s",
                     "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE", 4, "UNAVAILABLE"]}},
    {"name": [{"service": "echo.Echo"}, {"service": "kv.Store", "method": "Get"}],
     "hedgingPolicy": {"maxAttempts": 9, "hedgingDelay": ".05s", "nonFatalStatusCodes": ["UNAVAILABLE", "INTERNAL"]}},
    {"name": [{}], "MaxRequestMessageBytes": 1024}
  ],
  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
}`

func TestParseFull(t *testing.T) {
	c, err := Parse([]byte(full), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Methods) != 3 {
		t.Fatalf("%d methods", len(c.Methods))
	}
	m := c.Methods[0]
	if m.Timeout != 2500*time.Millisecond || m.WaitForReady == nil || !*m.WaitForReady || m.Hedging != nil {
		t.Errorf("entry 0: %+v", m)
	}
	r := m.Retry
	want := RetryPolicy{MaxAttempts: 4, Requested: 4, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second,
		BackoffMultiplier: 2, RetryableStatusCodes: []Code{Unavailable, DeadlineExceeded}}
	if r == nil || r.MaxAttempts != want.MaxAttempts || r.InitialBackoff != want.InitialBackoff ||
		r.MaxBackoff != want.MaxBackoff || r.BackoffMultiplier != 2 || !slices.Equal(r.RetryableStatusCodes, want.RetryableStatusCodes) {
		t.Errorf("retry policy = %+v, want %+v", r, want)
	}
	h := c.Methods[1].Hedging
	if h == nil || h.MaxAttempts != 5 || h.Requested != 9 || h.HedgingDelay != 50*time.Millisecond ||
		!slices.Equal(h.NonFatalStatusCodes, []Code{Unavailable, Internal}) {
		t.Errorf("hedging policy = %+v (maxAttempts 9 must be capped at 5)", h)
	}
	if c.Throttling == nil || *c.Throttling != (Throttling{MaxTokens: 10, TokenRatio: 0.1}) {
		t.Errorf("throttling = %+v", c.Throttling)
	}
}

// TestLookup checks gRPC's matching order: the method's entry, then its
// service's, then the default.
func TestLookup(t *testing.T) {
	c, err := Parse([]byte(full), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		method string
		want   int
	}{
		{"/echo.Echo/Say", 0},
		{"/echo.Echo/Shout", 1},
		{"/kv.Store/Get", 1},
		{"/kv.Store/Put", 2},
		{"/other.Svc/X", 2},
	} {
		if m := c.Lookup(x.method); m == nil || m.Index != x.want {
			t.Errorf("Lookup(%s) = %+v, want entry %d", x.method, m, x.want)
		}
	}
	c2, _ := Parse([]byte(`{"methodConfig": [{"name": [{"service": "a.A"}]}]}`), Options{})
	if m := c2.Lookup("/b.B/X"); m != nil {
		t.Errorf("no default entry, yet Lookup found %+v", m)
	}
	var none *Config
	if none.Lookup("/a.A/X") != nil {
		t.Error("nil Config found an entry")
	}
}

func TestParseOptionsMaxAttempts(t *testing.T) {
	js := `{"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 8, "initialBackoff": "1s",
		"maxBackoff": "1s", "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`
	for _, x := range []struct{ cap, want int }{{0, 5}, {7, 7}, {10, 8}} {
		c, err := Parse([]byte(js), Options{MaxAttempts: x.cap})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Methods[0].Retry.MaxAttempts; got != x.want {
			t.Errorf("cap %d: maxAttempts %d, want %d", x.cap, got, x.want)
		}
	}
	if _, err := Parse([]byte(js), Options{MaxAttempts: 1}); err == nil {
		t.Error("a cap of 1 was accepted")
	}
}

// TestParseErrors checks that every refusal names the JSON path and says
// why.
func TestParseErrors(t *testing.T) {
	retry := func(body string) string {
		return `{"methodConfig": [{"name": [{}], "retryPolicy": {` + body + `}}]}`
	}
	ok := `"maxAttempts": 3, "initialBackoff": "1s", "maxBackoff": "2s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]`
	for _, c := range []struct {
		name, js, path, reason string
	}{
		{"empty", ``, "", "empty"},
		{"syntax", "{\n  \"methodConfig\": [,]\n}", "", "line 2, column 20"},
		{"not an object", `[1]`, "(top)", "JSON object"},
		{"unknown top key", `{"methodConfigs": []}`, "methodConfigs", "expected one of"},
		{"a key twice", retry(`"maxAttempts": 3, "MaxAttempts": 4`), "methodConfig[0].retryPolicy.MaxAttempts", "given twice"},
		{"snake case", retry(`"max_attempts": 3`), "methodConfig[0].retryPolicy.max_attempts", `did you mean "maxAttempts"`},
		{"no name", `{"methodConfig": [{"timeout": "1s"}]}`, "methodConfig[0].name", "required"},
		{"empty name list", `{"methodConfig": [{"name": []}]}`, "methodConfig[0].name", "apply to no method"},
		{"method without service", `{"methodConfig": [{"name": [{"method": "X"}]}]}`, "methodConfig[0].name[0]", "needs its service"},
		{"duplicate name", `{"methodConfig": [{"name": [{"service": "a"}]}, {"name": [{"service": "a"}]}]}`, "methodConfig[1].name[0]", "already named at methodConfig[0].name[0]"},
		{"zero timeout", `{"methodConfig": [{"name": [{}], "timeout": "0s"}]}`, "methodConfig[0].timeout", "must be positive"},
		{"bad duration", `{"methodConfig": [{"name": [{}], "timeout": "1m"}]}`, "methodConfig[0].timeout", "no unit s"},
		{"duration as number", `{"methodConfig": [{"name": [{}], "timeout": 1}]}`, "methodConfig[0].timeout", "must be a string"},
		{"ten decimals", `{"methodConfig": [{"name": [{}], "timeout": "0.0000000001s"}]}`, "methodConfig[0].timeout", "nine decimals"},
		{"huge duration", `{"methodConfig": [{"name": [{}], "timeout": "999999999999s"}]}`, "methodConfig[0].timeout", "out of range"},
		{"both policies", `{"methodConfig": [{"name": [{}], "retryPolicy": {}, "hedgingPolicy": {}}]}`, "methodConfig[0]", "exclusive"},
		{"missing maxAttempts", retry(`"initialBackoff": "1s"`), "methodConfig[0].retryPolicy.maxAttempts", "required"},
		{"one attempt", retry(strings.Replace(ok, `"maxAttempts": 3`, `"maxAttempts": 1`, 1)), "methodConfig[0].retryPolicy.maxAttempts", "2 or more"},
		{"fractional attempts", retry(strings.Replace(ok, `"maxAttempts": 3`, `"maxAttempts": 2.5`, 1)), "methodConfig[0].retryPolicy.maxAttempts", "whole number"},
		{"zero backoff", retry(strings.Replace(ok, `"initialBackoff": "1s"`, `"initialBackoff": "0s"`, 1)), "methodConfig[0].retryPolicy.initialBackoff", "positive"},
		{"shrinking multiplier", retry(strings.Replace(ok, `"backoffMultiplier": 2`, `"backoffMultiplier": 0.5`, 1)), "methodConfig[0].retryPolicy.backoffMultiplier", "shrinks"},
		{"zero multiplier", retry(strings.Replace(ok, `"backoffMultiplier": 2`, `"backoffMultiplier": 0`, 1)), "methodConfig[0].retryPolicy.backoffMultiplier", "positive"},
		{"no codes", retry(strings.Replace(ok, `["UNAVAILABLE"]`, `[]`, 1)), "methodConfig[0].retryPolicy.retryableStatusCodes", "at least one"},
		{"lower-case code", retry(strings.Replace(ok, `["UNAVAILABLE"]`, `["UNAVAILABLE", "unavailable"]`, 1)), "methodConfig[0].retryPolicy.retryableStatusCodes[1]", `did you mean "UNAVAILABLE"`},
		{"code 17", retry(strings.Replace(ok, `["UNAVAILABLE"]`, `[17]`, 1)), "methodConfig[0].retryPolicy.retryableStatusCodes[0]", "0 to 16"},
		{"OK retried", retry(strings.Replace(ok, `["UNAVAILABLE"]`, `["OK"]`, 1)), "methodConfig[0].retryPolicy.retryableStatusCodes[0]", "OK is a success"},
		{"negative hedging delay", `{"methodConfig": [{"name": [{}], "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "-1s"}}]}`, "methodConfig[0].hedgingPolicy.hedgingDelay", "negative"},
		{"throttling without ratio", `{"retryThrottling": {"maxTokens": 10}}`, "retryThrottling.tokenRatio", "required"},
		{"too many tokens", `{"retryThrottling": {"maxTokens": 1001, "tokenRatio": 1}}`, "retryThrottling.maxTokens", "(0, 1000]"},
		{"tiny ratio", `{"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.0001}}`, "retryThrottling.tokenRatio", "thousandths"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.js), Options{})
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want an *Error", err)
			}
			if e.Path != c.path || !strings.Contains(e.Error(), c.reason) {
				t.Fatalf("err = %q (path %q), want path %q and %q", err, e.Path, c.path, c.reason)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	big := make([]byte, MaxSize+1)
	if _, err := Parse(big, Options{}); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("err = %v", err)
	}
}

// TestPolicy checks the resil policies built from each kind of entry.
func TestPolicy(t *testing.T) {
	c, err := Parse([]byte(full), Options{})
	if err != nil {
		t.Fatal(err)
	}
	throttle, err := c.NewThrottle()
	if err != nil {
		t.Fatal(err)
	}
	th, ok := throttle.(*budget.GRPCThrottle)
	if !ok || th.Tokens(time.Time{}) != 10 {
		t.Fatalf("throttle = %T %v", throttle, throttle)
	}
	p := c.Lookup("/echo.Echo/Say").Policy(throttle)
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.MaxRetries != 3 || !p.PushbackRestarts || p.Budget != throttle || p.Hedge.Delay != 0 {
		t.Errorf("retry entry's policy = %+v", p)
	}
	wantB := resil.Backoff{Schedule: resil.Exponential, Base: 100 * time.Millisecond, Cap: time.Second,
		Multiplier: 2, Jitter: resil.FactorJitter, Factor: 0.2, UncappedJitter: true}
	if p.Backoff != wantB {
		t.Errorf("backoff = %+v, want %+v", p.Backoff, wantB)
	}
	h := c.Lookup("/kv.Store/Get").Policy(throttle)
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	if h.MaxRetries != 0 || h.Hedge != (resil.HedgeSettings{Delay: 50 * time.Millisecond, Max: 4}) {
		t.Errorf("hedging entry's policy = %+v", h)
	}
	if d := c.Lookup("/x.X/Y").Policy(nil); d.MaxRetries != 0 || d.Hedge.Delay != 0 || d.Budget != nil {
		t.Errorf("entry without a policy = %+v", d)
	}
	var none *Method
	if p := none.Policy(nil); p.MaxRetries != 0 {
		t.Errorf("nil entry's policy = %+v", p)
	}
	if b, err := (&Config{}).NewThrottle(); b != nil || err != nil {
		t.Errorf("no throttling: %v, %v; want a nil budget", b, err)
	}
}

// TestBackoffIsGRPCs draws the delays of the built backoff and checks them
// against grpc-go's formula, for an initialBackoff above maxBackoff too.
func TestBackoffIsGRPCs(t *testing.T) {
	for _, rp := range []RetryPolicy{
		{InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, BackoffMultiplier: 1.6},
		{InitialBackoff: 3 * time.Second, MaxBackoff: time.Second, BackoffMultiplier: 2},
	} {
		b := rp.Backoff()
		if err := b.Validate(); err != nil {
			t.Fatal(err)
		}
		src := rand.NewPCG(1, 2)
		ref := rand.New(rand.NewPCG(1, 2))
		for n := range 10 {
			got := b.Delay(n+1, 0, src)
			fact := 1.0
			for range n {
				fact *= rp.BackoffMultiplier
			}
			cur := min(float64(rp.InitialBackoff)*fact, float64(rp.MaxBackoff))
			cur *= 0.8 + 0.4*ref.Float64()
			if want := time.Duration(int64(cur)); got != want {
				t.Errorf("%+v retry %d: %v, want %v", rp, n+1, got, want)
			}
		}
	}
}

// TestHedgingDelayZero: all hedges at once becomes the least delay resil
// can mean.
func TestHedgingDelayZero(t *testing.T) {
	c, err := Parse([]byte(`{"methodConfig": [{"name": [{}], "hedgingPolicy": {"maxAttempts": 3}}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := c.Methods[0].Policy(nil)
	if p.Hedge.Delay != time.Nanosecond || p.Hedge.Max != 2 || p.Validate() != nil {
		t.Fatalf("policy = %+v", p)
	}
}

func TestDurationForms(t *testing.T) {
	for in, want := range map[string]time.Duration{
		`"1s"`: time.Second, `".5s"`: 500 * time.Millisecond, `"0.000000001s"`: 1, `"2.s"`: 2 * time.Second,
		`"315576000000s"`: 1<<63 - 1, `"-1.5s"`: -1500 * time.Millisecond,
	} {
		got, err := duration("d", []byte(in))
		if err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{`"s"`, `"."`, `".s"`, `"1.2.3s"`, `"1e3s"`, `"+1s"`, `"1 s"`} {
		if _, err := duration("d", []byte(in)); err == nil {
			t.Errorf("%s accepted", in)
		}
	}
}

// TestOnlyStandardLibraryAndResil keeps the importer free of gRPC: this
// package may import the standard library and resil (its budgets and their
// internal packages included), nothing else.
func TestOnlyStandardLibraryAndResil(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		servertest.Missing(t, "go list: %v", err)
	}
	const resil = "github.com/retrystorm/retrystorm/resil"
	for _, p := range strings.Fields(string(out)) {
		if p != resil && p != resil+"/budget" && !strings.HasPrefix(p, resil+"/internal/") && p != resil+"/resilgrpc/grpcconfig" {
			t.Errorf("grpcconfig depends on %s", p)
		}
	}
}
