package grpcconfig

import (
	"fmt"
	"reflect"
	"testing"
)

// FuzzParse checks that Parse never panics, gives the same answer twice
// (no map order leaks into it), and that every config it accepts builds
// valid resil policies and a throttle.
func FuzzParse(f *testing.F) {
	f.Add([]byte(full))
	f.Add([]byte(`{"methodConfig": [{"name": [{}], "hedgingPolicy": {"maxAttempts": 3}}]}`))
	f.Add([]byte(`{"retryThrottling": {"maxTokens": 0.5, "tokenRatio": 5000}}`))
	f.Add([]byte(`{"methodConfig": [{"name": [{"service": "a"}], "retryPolicy": {"MaxAttempts": 2,
		"InitialBackoff": "9s", "MaxBackoff": ".001s", "BackoffMultiplier": 1000, "RetryableStatusCodes": [1, 16]}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, Options{})
		c2, err2 := Parse(data, Options{})
		if fmt.Sprint(err) != fmt.Sprint(err2) || !reflect.DeepEqual(c, c2) {
			t.Fatalf("two parses differ: %v / %v", err, err2)
		}
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		b, err := c.NewThrottle()
		if err != nil {
			t.Fatalf("accepted throttling %+v fails: %v", c.Throttling, err)
		}
		for i := range c.Methods {
			p := c.Methods[i].Policy(b)
			if err := p.Validate(); err != nil {
				t.Fatalf("entry %d: %v", i, err)
			}
			for _, n := range c.Methods[i].Names {
				path := n.Path()
				if n.Service != "" {
					path += "x"
					if n.Method != "" {
						path = n.Path()
					}
				}
				if c.Lookup(path) == nil {
					t.Fatalf("%q finds no entry", path)
				}
			}
		}
	})
}
