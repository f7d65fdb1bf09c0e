package importer

import (
	"errors"
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1alpha3"
)

// checkIstioRoutes applies Istio's validation of a VirtualService's HTTP
// routes, as far as the import reads them, to vs read from spec (its
// spec's node): Istio refuses what breaks it, so the import does too.
// The rules are istio/istio's pkg/config/validation/agent/validation.go
// (master 86c9f01, 1.31 dev): ValidateHTTPRetry and ValidateDuration,
// which pkg/config/validation/virtualservice.go applies to each route's
// retries and timeout.
func checkIstioRoutes(file string, spec *yaml.Node, vs *networking.VirtualService) error {
	for i, h := range vs.GetHttp() {
		at := func(key string, format string, args ...any) error {
			line, shown := lineAt(spec, fmt.Sprintf("http[%d].%s", i, key))
			return fmt.Errorf("%s:%d: spec.%s: %s (Istio refuses it)", file, line, shown, fmt.Sprintf(format, args...))
		}
		if err := istioDuration(h.GetTimeout()); err != nil {
			return at("timeout", "%v", err)
		}
		r := h.GetRetries()
		if r == nil {
			continue
		}
		if r.GetAttempts() < 0 {
			return at("retries.attempts", "%d: attempts cannot be negative", r.GetAttempts())
		}
		if r.GetAttempts() == 0 && (r.GetPerTryTimeout() != nil || r.GetRetryOn() != "" || r.GetRetryRemoteLocalities() != nil) {
			return at("retries", "http retry policy configured when attempts are set to 0 (disabled)")
		}
		if err := istioDuration(r.GetPerTryTimeout()); err != nil {
			return at("retries.perTryTimeout", "%v", err)
		}
		if err := istioDuration(r.GetBackoff()); err != nil {
			return at("retries.backoff", "%v", err)
		}
	}
	return nil
}

// istioDuration is Istio's ValidateDuration, for a duration that is set.
func istioDuration(d *durationpb.Duration) error {
	if d == nil {
		return nil
	}
	switch v := d.AsDuration(); {
	case v < time.Millisecond:
		return errors.New("duration must be greater than 1ms")
	case v%time.Millisecond != 0:
		return errors.New("only durations to ms precision are supported")
	}
	return nil
}
