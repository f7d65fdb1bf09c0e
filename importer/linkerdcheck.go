package importer

import (
	"fmt"
	"math"

	"go.yaml.in/yaml/v3"
)

// checkLinkerdBudget refuses the retry budgets Linkerd refuses, naming
// the line; d is the ServiceProfile's document. Linkerd reads a
// ServiceProfile as JSON (sigs.k8s.io/yaml) into the types of
// linkerd/linkerd2 controller/gen/apis/serviceprofile/v1alpha2/types.go
// (edge-26.8.3): retryRatio a float32, minRetriesPerSecond a uint32; and
// pkg/profiles/profiles.go's Validate: "RetryRatio must be
// non-negative".
func checkLinkerdBudget(file string, d *yaml.Node, sp *serviceProfile) error {
	rb := sp.Spec.RetryBudget
	if rb == nil {
		return nil
	}
	at := func(key, format string, args ...any) error {
		line, shown := lineAt(d, "spec.retryBudget."+key)
		written := ""
		if n := get(get(get(d, "spec"), "retryBudget"), key); n != nil {
			written = n.Value
		}
		return fmt.Errorf("%s:%d: %s: %s: %s (Linkerd refuses it)", file, line, shown, written, fmt.Sprintf(format, args...))
	}
	if r := rb.RetryRatio; r != nil {
		switch v := *r; {
		case math.IsNaN(v) || math.IsInf(v, 0):
			return at("retryRatio", "is not a number Linkerd can read (it reads the profile as JSON, which has none)")
		case v < 0:
			return at("retryRatio", "RetryRatio must be non-negative")
		case v > math.MaxFloat32:
			return at("retryRatio", "is more than a float32, as Linkerd holds it, can be")
		}
	}
	if m := rb.MinRetriesPerSecond; m != nil {
		if v := *m; !(v >= 0 && v <= math.MaxUint32 && v == math.Trunc(v)) {
			return at("minRetriesPerSecond", "Linkerd holds it as a whole number from 0 to %d", uint64(math.MaxUint32))
		}
	}
	return nil
}
