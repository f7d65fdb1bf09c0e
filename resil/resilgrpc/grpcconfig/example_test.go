package grpcconfig_test

import (
	"fmt"

	"github.com/retrystorm/retrystorm/resil/resilgrpc/grpcconfig"
)

// Read a service config and build the resil policy each method gets, paid
// from the channel's retry throttle.
func ExampleParse() {
	js := []byte(`{
	  "methodConfig": [{
	    "name": [{"service": "echo.Echo"}],
	    "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.1s", "maxBackoff": "1s",
	                    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}
	  }],
	  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
	}`)
	c, err := grpcconfig.Parse(js, grpcconfig.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	throttle, _ := c.NewThrottle()
	m := c.Lookup("/echo.Echo/Say")
	p := m.Policy(throttle)
	fmt.Println("retries:", p.MaxRetries, "codes:", m.Codes())
	fmt.Println("backoff:", p.Backoff.Base, "×", p.Backoff.Multiplier, "up to", p.Backoff.Cap, "jitter ±", p.Backoff.Factor)
	fmt.Printf("budget: %T\n", p.Budget)
	fmt.Println("other services:", c.Lookup("/kv.Store/Get") == nil)
	// Output:
	// retries: 3 codes: [UNAVAILABLE]
	// backoff: 100ms × 2 up to 1s jitter ± 0.2
	// budget: *budget.GRPCThrottle
	// other services: true
}

// A value that cannot be honoured is refused with its JSON path.
func ExampleError() {
	_, err := grpcconfig.Parse([]byte(`{"methodConfig": [{"name": [{}],
	  "retryPolicy": {"maxAttempts": 3, "initialBackoff": "1s", "maxBackoff": "5s",
	                  "backoffMultiplier": 0.5, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`), grpcconfig.Options{})
	fmt.Println(err)
	// Output:
	// grpcconfig: methodConfig[0].retryPolicy.backoffMultiplier: 0.5: a backoff that shrinks; resil's backoff grows by a multiplier in [1, 1000]
}
