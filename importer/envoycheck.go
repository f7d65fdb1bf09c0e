package importer

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Envoy's own rules on the settings the import reads, applied where they
// are read so that a refusal names the line. Envoy refuses a config that
// breaks them, so the import does too (docs/import.md):
//
//   - the PGV rules of its API, which go-control-plane generates as
//     Validate methods (RetryBackOff's intervals "gt: 0s",
//     envoy/config/route/v3/route_components.proto; a retry budget's
//     budget_percent, a type.v3.Percent in [0, 100]);
//   - source/common/router/retry_policy_impl.cc: each interval rounded up
//     to 1ms, and "retry_policy.max_interval must greater than or equal to
//     the base_interval";
//   - source/common/protobuf/utility.cc (DurationUtil): a negative
//     duration is "Expected positive duration".
//
// The routes' other messages (matches, domains) are not checked: they do
// not bear on retries, and a fragment of a config may leave them out.

// pgvError is the shape of the errors go-control-plane's Validate returns.
type pgvError interface {
	error
	Field() string
	Reason() string
	Cause() error
}

// checkEnvoyRoutes checks the retry policies and timeouts of rc, read
// from n; path is where rc is in its file (".": n is a bare virtual host).
func checkEnvoyRoutes(file string, n *yaml.Node, rc *routev3.RouteConfiguration, path string) error {
	for vi, vh := range rc.GetVirtualHosts() {
		vhPath := fmt.Sprintf("virtual_hosts[%d]", vi)
		if path == "." {
			vhPath = ""
		}
		if err := checkEnvoyRetry(file, n, vh.GetRetryPolicy(), joinPath(vhPath, "retry_policy")); err != nil {
			return envoyAt(path, err)
		}
		for ri, r := range vh.GetRoutes() {
			act := r.GetRoute()
			if act == nil {
				continue
			}
			rp := joinPath(vhPath, fmt.Sprintf("routes[%d].route", ri))
			if err := checkEnvoyDuration(file, n, act.GetTimeout(), rp+".timeout"); err != nil {
				return envoyAt(path, err)
			}
			if err := checkEnvoyRetry(file, n, act.GetRetryPolicy(), rp+".retry_policy"); err != nil {
				return envoyAt(path, err)
			}
		}
	}
	return nil
}

// envoyError is a refusal at a path relative to the message checked.
type envoyError struct {
	file string
	line int
	path string
	msg  string
}

func (e *envoyError) Error() string {
	if e.line > 0 {
		return fmt.Sprintf("%s:%d: %s: %s", e.file, e.line, e.path, e.msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.file, e.path, e.msg)
}

// envoyAt puts the path of the message checked in front of err's.
func envoyAt(path string, err error) error {
	var e *envoyError
	if path != "" && path != "." && errors.As(err, &e) {
		e.path = path + "." + e.path
	}
	return err
}

func checkEnvoyRetry(file string, n *yaml.Node, rp *routev3.RetryPolicy, path string) error {
	if rp == nil {
		return nil
	}
	if err := rp.Validate(); err != nil {
		return pgvRefusal(file, n, path, err)
	}
	if err := checkEnvoyDuration(file, n, rp.GetPerTryTimeout(), path+".per_try_timeout"); err != nil {
		return err
	}
	if bo := rp.GetRetryBackOff(); bo != nil && bo.GetMaxInterval() != nil {
		base := max(bo.GetBaseInterval().AsDuration().Truncate(time.Millisecond), time.Millisecond)
		maxB := max(bo.GetMaxInterval().AsDuration().Truncate(time.Millisecond), time.Millisecond)
		if maxB < base {
			p := path + ".retry_back_off.max_interval"
			line, shown := lineAt(n, p)
			return &envoyError{file, line, shown, fmt.Sprintf("%s is below base_interval %s: Envoy refuses it (\"retry_policy.max_interval must greater than or equal to the base_interval\", in milliseconds)",
				showDur(bo.GetMaxInterval()), showDur(bo.GetBaseInterval()))}
		}
	}
	return nil
}

func checkEnvoyDuration(file string, n *yaml.Node, d *durationpb.Duration, path string) error {
	if d == nil || d.AsDuration() >= 0 {
		return nil
	}
	line, shown := lineAt(n, path)
	return &envoyError{file, line, shown, fmt.Sprintf("%s: Envoy refuses a negative duration (\"Expected positive duration\")", showDur(d))}
}

// checkEnvoyCluster checks the circuit breakers of cl, read from n, at
// path in its file.
func checkEnvoyCluster(file string, n *yaml.Node, cl *clusterv3.Cluster, path string) error {
	cb := cl.GetCircuitBreakers()
	if cb == nil {
		return nil
	}
	if err := cb.Validate(); err != nil {
		return envoyAt(path, pgvRefusal(file, n, "circuit_breakers", err))
	}
	for i, th := range cb.GetThresholds() {
		if v := th.GetRetryBudget().GetBudgetPercent(); v != nil && math.IsNaN(v.GetValue()) {
			p := fmt.Sprintf("circuit_breakers.thresholds[%d].retry_budget.budget_percent", i)
			line, shown := lineAt(n, p)
			return envoyAt(path, &envoyError{file, line, shown, "NaN is not a percentage: Envoy's range check, [0, 100], does not catch it, and the budget it would make is undefined; give a number from 0 to 100"})
		}
	}
	return nil
}

// pgvRefusal turns a Validate error on the message at path into a
// refusal naming the field's line.
func pgvRefusal(file string, n *yaml.Node, path string, err error) error {
	reason := err.Error()
	for {
		var pe pgvError
		if !errors.As(err, &pe) {
			break
		}
		path += "." + pe.Field()
		reason = pe.Reason()
		if pe.Cause() == nil {
			break
		}
		err = pe.Cause()
	}
	line, shown := lineAt(n, path)
	return &envoyError{file, line, shown, reason + " (Envoy refuses it: a rule of its API)"}
}

// lineAt follows path ("a.b[2].c_d", keys matched as Envoy's loader
// matches them: snake_case, lowerCamelCase or the Go name) from n, and
// returns the line of the deepest node found and the path as the file
// spells it.
func lineAt(n *yaml.Node, path string) (int, string) {
	line, shown := n.Line, ""
	for _, seg := range strings.Split(path, ".") {
		if seg == "" {
			continue
		}
		key, idx, hasIdx := seg, 0, false
		if i := strings.IndexByte(seg, '['); i >= 0 && strings.HasSuffix(seg, "]") {
			if v, err := strconv.Atoi(seg[i+1 : len(seg)-1]); err == nil {
				key, idx, hasIdx = seg[:i], v, true
			}
		}
		n = deref(n)
		var next *yaml.Node
		if n != nil && n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if fold(n.Content[i].Value) == fold(key) {
					key, next = n.Content[i].Value, deref(n.Content[i+1])
					line = n.Content[i].Line
					break
				}
			}
		}
		if next != nil && hasIdx {
			if next.Kind == yaml.SequenceNode && idx < len(next.Content) {
				next = deref(next.Content[idx])
				line = next.Line
			} else {
				next = nil
			}
		}
		if hasIdx {
			key = fmt.Sprintf("%s[%d]", key, idx)
		}
		shown = joinPath(shown, key)
		n = next
	}
	return line, shown
}

// fold is a key as compared: budget_percent, budgetPercent and
// BudgetPercent are the same field.
func fold(k string) string {
	return strings.ToLower(strings.ReplaceAll(k, "_", ""))
}

func showDur(d *durationpb.Duration) string {
	return fmtDur(d.AsDuration())
}
