package importer

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1alpha3"
)

// Istio's validation of the fields advise writes, written out: the
// validator lives in istio.io/istio, a module far too heavy to link. Read
// at istio/istio 1.30.3:
//
//   - pkg/config/validation/virtualservice.go, validateHTTPRoute: a route's
//     timeout passes ValidateDuration; its retries pass validateHTTPRetry.
//   - pkg/config/validation/validation.go, validateHTTPRetry: attempts is
//     not negative; with attempts 0 (retries disabled) neither
//     perTryTimeout, retryOn nor retryRemoteLocalities may be set ("http
//     retry policy configured when attempts are set to 0 (disabled)");
//     perTryTimeout and backoff pass ValidateDuration; each retryOn policy
//     is one of supportedRetryOnPolicies or an HTTP status code (one
//     net/http's StatusText names).
//   - validation.go, validateTrafficPolicy: a trafficPolicy sets at least
//     one field; validateOutlierDetection: baseEjectionTime and interval
//     pass ValidateDuration, consecutiveLocalOriginFailures needs
//     splitExternalLocalOriginErrors, maxEjectionPercent and
//     minHealthPercent are in 0..100; validateConnectionPool: a
//     connectionPool sets http or tcp, and http.maxRetries is not
//     negative.
//   - virtualservice.go, validateHTTPRouteConflict: a route has a route,
//     a redirect or a direct response.
//   - pkg/config/validation/agent/validation.go, ValidateDuration: at
//     least 1ms, in whole milliseconds.
//
// The rest of Istio's validation (matches, hosts, TLS, subsets) does not
// bear on what advise writes and is not repeated here.

// istioRetryOnPolicies is validation.go's supportedRetryOnPolicies.
var istioRetryOnPolicies = map[string]bool{
	"5xx": true, "gateway-error": true, "reset": true, "reset-before-request": true, "connect-failure": true,
	"retriable-4xx": true, "refused-stream": true, "retriable-status-codes": true, "retriable-headers": true,
	"envoy-ratelimited": true, "http3-post-connect-failure": true,
	"cancelled": true, "deadline-exceeded": true, "internal": true, "resource-exhausted": true, "unavailable": true,
}

// istioValidDuration is agent.ValidateDuration.
func istioValidDuration(d *durationpb.Duration) error {
	v := d.AsDuration()
	switch {
	case v < 1e6:
		return errors.New("duration must be greater than 1ms")
	case v%1e6 != 0:
		return errors.New("only durations to ms precision are supported")
	}
	return nil
}

// istioHTTPRetry is validateHTTPRetry.
func istioHTTPRetry(r *networking.HTTPRetry) []error {
	if r == nil {
		return nil
	}
	var errs []error
	if r.GetAttempts() < 0 {
		errs = append(errs, errors.New("attempts cannot be negative"))
	}
	if r.GetAttempts() == 0 && (r.GetPerTryTimeout() != nil || r.GetRetryOn() != "" || r.GetRetryRemoteLocalities() != nil) {
		errs = append(errs, errors.New("http retry policy configured when attempts are set to 0 (disabled)"))
	}
	if r.GetPerTryTimeout() != nil {
		errs = append(errs, istioValidDuration(r.GetPerTryTimeout()))
	}
	if r.GetRetryOn() != "" {
		for _, p := range strings.Split(r.GetRetryOn(), ",") {
			i, _ := strconv.Atoi(p)
			if http.StatusText(i) == "" && !istioRetryOnPolicies[p] {
				errs = append(errs, fmt.Errorf("%q is not a valid retryOn policy", p))
			}
		}
	}
	if r.GetBackoff() != nil {
		errs = append(errs, istioValidDuration(r.GetBackoff()))
	}
	return errs
}

// istioTrafficPolicy is validateTrafficPolicy, as far as the retry budget,
// connection pool and outlier detection go.
func istioTrafficPolicy(tp *networking.TrafficPolicy) []error {
	if tp == nil {
		return nil
	}
	if tp.GetOutlierDetection() == nil && tp.GetConnectionPool() == nil && tp.GetLoadBalancer() == nil && tp.GetTls() == nil &&
		tp.GetPortLevelSettings() == nil && tp.GetTunnel() == nil && tp.GetProxyProtocol() == nil && tp.GetRetryBudget() == nil {
		return []error{errors.New("traffic policy must have at least one field")}
	}
	var errs []error
	if od := tp.GetOutlierDetection(); od != nil {
		if od.GetBaseEjectionTime() != nil {
			errs = append(errs, istioValidDuration(od.GetBaseEjectionTime()))
		}
		if !od.GetSplitExternalLocalOriginErrors() && od.GetConsecutiveLocalOriginFailures().GetValue() > 0 {
			errs = append(errs, errors.New("outlier detection consecutive local origin failures is specified, but split external local origin errors is set to false"))
		}
		if od.GetInterval() != nil {
			errs = append(errs, istioValidDuration(od.GetInterval()))
		}
		for _, p := range []int32{od.GetMaxEjectionPercent(), od.GetMinHealthPercent()} {
			if p < 0 || p > 100 {
				errs = append(errs, fmt.Errorf("percentage %v is not in range 0..100", p))
			}
		}
	}
	if cp := tp.GetConnectionPool(); cp != nil {
		if cp.GetHttp() == nil && cp.GetTcp() == nil {
			errs = append(errs, errors.New("connection pool must have at least one field"))
		}
		if cp.GetHttp().GetMaxRetries() < 0 {
			errs = append(errs, errors.New("max retries must be non-negative"))
		}
	}
	return errs
}

// istioErrors reads each Istio object of a file strictly (istio.io/api's
// own messages, protojson without DiscardUnknown) and applies the rules
// above to its VirtualService routes and DestinationRule traffic policy.
func istioErrors(name string, data []byte) []string {
	docs, err := documents(name, data)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, d := range docs {
		kind, obj := str(d, "kind"), str(get(d, "metadata"), "name")
		if !strings.Contains(str(d, "apiVersion"), "istio.io") {
			continue
		}
		spec := get(d, "spec")
		say := func(where string, errs []error) {
			for _, e := range errs {
				if e != nil {
					out = append(out, fmt.Sprintf("%s %s: spec%s: %v (Istio refuses it)", kind, obj, where, e))
				}
			}
		}
		switch kind {
		case "VirtualService":
			vs := &networking.VirtualService{}
			if _, err := readProto(name, spec, vs, true); err != nil {
				out = append(out, err.Error())
				continue
			}
			for i, h := range vs.GetHttp() {
				at := fmt.Sprintf(".http[%d]", i)
				if h.GetTimeout() != nil {
					say(at+".timeout", []error{istioValidDuration(h.GetTimeout())})
				}
				say(at+".retries", istioHTTPRetry(h.GetRetries()))
				if len(h.GetRoute()) == 0 && h.GetRedirect() == nil && h.GetDirectResponse() == nil && h.GetDelegate() == nil {
					say(at, []error{errors.New("HTTP route, redirect or direct_response is required")})
				}
			}
		case "DestinationRule":
			dr := &networking.DestinationRule{}
			if _, err := readProto(name, spec, dr, true); err != nil {
				out = append(out, err.Error())
				continue
			}
			say(".trafficPolicy", istioTrafficPolicy(dr.GetTrafficPolicy()))
		}
	}
	return out
}
