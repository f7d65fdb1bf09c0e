package importer

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/resil/budget"
	"github.com/retrystorm/retrystorm/scenario"
)

// The AWS SDKs' documented defaults (AWS SDKs and Tools Reference Guide,
// "Retry behavior"; docs/import.md cites them).
const (
	awsMaxAttempts = 3 // standard and adaptive: "Makes three attempts"
	// aws-sdk-go-v2 waits rand × 2^attempt seconds before retry number
	// attempt (1 for the first retry), and exactly MaxBackoff once 2^attempt
	// passes it (aws/retry/jitter_backoff.go,
	// ExponentialJitterBackoff.BackoffDelay; DefaultMaxBackoff 20s in
	// aws/retry/standard.go): full jitter from a 2s base.
	awsBackoffBase = 2 * time.Second
	awsMaxBackoff  = 20 * time.Second // MAX_BACKOFF
	awsSDK         = "aws-sdk-go-v2"  // the SDK whose behaviour is imported
)

// awsProfile is one section of a shared config file (or the environment).
type awsProfile struct {
	name     string
	line     int
	settings map[string]awsValue
	// nested lists the sub-properties read under a key with no value
	// ("s3 =" then indented "max_attempts = 5"): settings of that
	// service's clients, not the profile's.
	nested []string
}

type awsValue struct {
	v    string
	line int
}

// parseAWS reads a shared config file's sections, or environment-style
// lines (AWS_RETRY_MODE=adaptive), into profiles.
func parseAWS(file string, data []byte) ([]*awsProfile, error) {
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s: larger than the %d bytes a config file may be", file, maxFileBytes)
	}
	var out []*awsProfile
	var cur *awsProfile
	byName := map[string]*awsProfile{}
	key := "" // the last key of the current section, for indented lines
	env := &awsProfile{name: "environment", settings: map[string]awsValue{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxFileBytes)
	for n := 1; sc.Scan(); n++ {
		raw := sc.Text()
		l := strings.TrimSpace(raw)
		if l == "" || l[0] == '#' || l[0] == ';' {
			continue
		}
		if iniSection.MatchString(l) {
			name := strings.TrimSpace(l[1 : len(l)-1])
			name = strings.TrimSpace(strings.TrimPrefix(name, "profile "))
			// Sections of one name are one profile, later keys winning,
			// as the SDKs read them (aws-sdk-go-v2 internal/ini/parse.go).
			if cur = byName[name]; cur == nil {
				cur = &awsProfile{name: name, line: n, settings: map[string]awsValue{}}
				byName[name] = cur
				out = append(out, cur)
			}
			key = ""
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		// An indented line belongs to the key above it
		// (aws-sdk-go-v2 internal/ini/tokenize.go and parse.go): with
		// "=", a sub-property of a key with no value ("s3 =", a
		// service's own settings), or a property of its own when that
		// key has a value; without, the value's continuation.
		if indented := raw[0] == ' ' || raw[0] == '\t'; indented && cur != nil && key != "" {
			switch {
			case ok && cur.settings[key].v == "":
				cur.nested = append(cur.nested, fmt.Sprintf("%s: %s (line %d)", key, l, n))
				continue
			case !ok:
				kv := cur.settings[key]
				if kv.v != "" {
					kv.v += "\n" + l
					cur.settings[key] = kv
				}
				continue
			}
		}
		if !ok {
			return nil, fmt.Errorf("%s:%d: %q is neither a [section] nor key = value", file, n, l)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if i := strings.IndexAny(v, "#;"); i > 0 && (v[i-1] == ' ' || v[i-1] == '\t') {
			v = strings.TrimSpace(v[:i]) // an inline comment
		}
		if strings.HasPrefix(k, "export ") || strings.HasPrefix(k, "AWS_") {
			k = strings.TrimSpace(strings.TrimPrefix(k, "export "))
			v = strings.Trim(v, `"'`)
			switch k {
			case "AWS_RETRY_MODE":
				env.settings["retry_mode"] = awsValue{v, n}
			case "AWS_MAX_ATTEMPTS":
				env.settings["max_attempts"] = awsValue{v, n}
			}
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("%s:%d: %s before any [section]", file, n, k)
		}
		k = strings.ToLower(k) // the SDKs' keys are not case-sensitive
		cur.settings[k] = awsValue{v, n}
		key = k
	}
	if len(env.settings) > 0 {
		out = append(out, env)
	}
	return out, nil
}

func importAWS(srcs []Source, o Options) ([]Fleet, error) {
	var out fleetSet
	n := 0
	for _, s := range srcs {
		profiles, err := parseAWS(s.Name, s.Data)
		if err != nil {
			return nil, err
		}
		var withRetry []*awsProfile
		for _, p := range profiles {
			if _, ok := p.settings["retry_mode"]; ok {
				withRetry = append(withRetry, p)
			} else if _, ok := p.settings["max_attempts"]; ok {
				withRetry = append(withRetry, p)
			}
		}
		if len(withRetry) == 0 {
			return nil, fmt.Errorf("%s: no profile sets retry_mode or max_attempts: nothing to import (every profile runs the SDK's default)", s.Name)
		}
		if n += len(withRetry); n > maxItems {
			return nil, admit(AWS, n, "profiles")
		}
		// The SDKs read a profile's settings only when it is selected: an
		// invalid profile fails the clients that select it, not the file.
		// It is left out, and the others say so; only a file with no valid
		// profile is an error.
		var fleets []Fleet
		var skipped []string
		var first error
		for _, p := range withRetry {
			f, err := awsFleet(s.Name, p, o)
			if err != nil {
				skipped = append(skipped, strings.TrimPrefix(err.Error(), s.Name+": "))
				first = cmp.Or(first, err)
				continue
			}
			fleets = append(fleets, f)
		}
		if len(fleets) == 0 {
			return nil, first
		}
		for i := range fleets {
			for _, sk := range skipped {
				fleets[i].Lost = append(fleets[i].Lost, "another profile in the file is invalid and not imported (an SDK fails only when it selects it): "+sk)
			}
		}
		for _, f := range fleets {
			out.add(f)
		}
	}
	return out.list, nil
}

func awsFleet(file string, pr *awsProfile, o Options) (Fleet, error) {
	p := &prov{file: file}
	// at is where key k is set: an INI key, or an environment variable.
	at := func(k string) Provenance {
		v := Provenance{File: file, Path: fmt.Sprintf("[%s] %s", pr.name, k), Line: pr.settings[k].line}
		if pr.name == "environment" {
			v.Path, v.lineForm = "AWS_"+strings.ToUpper(k), lineBefore
		}
		return v
	}
	f := scenario.Fleet{Name: "aws " + pr.name}
	for _, n := range pr.nested {
		p.lose("%s: settings for that service's clients only, not the profile's: not imported", n)
	}
	mode, set := "standard", false
	if v, ok := pr.settings["retry_mode"]; ok {
		mode, set = strings.ToLower(v.v), true
	}
	switch mode {
	case "standard":
		f.Budget = scenario.Budget{Use: scenario.BudgetAWS, AWS: budget.AWSQuotaSettings{Capacity: 500, RetryCost: 5, TimeoutCost: 10, NoRetryIncrement: 1}}
	case "adaptive":
		f.Budget = scenario.Budget{Use: scenario.BudgetAWSAdaptive, AWS: budget.AWSQuotaSettings{Capacity: 500, RetryCost: 5, TimeoutCost: 10, NoIncrement: true}, Pacer: budget.ClientRateLimiterSettings{Beta: 0.7, ScaleConstant: 0.4, Smoothing: 0.8, MinFillRate: 0.5}}
		p.note("budget (rate limiter)", "beta 0.7, scale_constant 0.4, smoothing 0.8, min_fill_rate 0.5", "the adaptive mode's constants")
		p.note("budget.no_retry_increment", "0", awsSDK+"'s adaptive mode never pays the increment for an attempt that succeeds (aws/retry/adaptive.go; aws-sdk-go-v2 issue 3550): after about 100 net retries a client retries no more")
	case "legacy":
		f.Budget = scenario.Budget{Use: scenario.BudgetAWS, AWS: budget.AWSQuotaSettings{Capacity: 500, RetryCost: 5, TimeoutCost: 10, NoRetryIncrement: 1}}
		p.lose("retry_mode legacy is specific to each SDK: imported as standard")
	default:
		return Fleet{}, fmt.Errorf("%s: %s: retry_mode %q: want standard, adaptive or legacy", file, at("retry_mode").At(), mode)
	}
	// The note says the budget the fleet holds (aws, aws_adaptive), and
	// the mode it came from.
	if set {
		p.took("budget.use", string(f.Budget.Use), at("retry_mode")).by(afterComma, "retry_mode "+mode)
	} else {
		p.dflt("budget.use", string(f.Budget.Use), "retry_mode", "standard: the SDKs' defaults differ; standard is the reference guide's recommended mode")
	}
	p.note("budget.settings", fmt.Sprintf("capacity 500, retry_cost 5, timeout_cost 10, no_retry_increment %d", f.Budget.AWS.NoRetryIncrement), "the standard mode's retry quota")
	p.note("sdk", awsSDK, "assumed: the SDKs differ in backoff and in the adaptive mode's quota; botocore and the Java SDK wait about half as long and refill the adaptive quota")
	attempts := awsMaxAttempts
	if v, ok := pr.settings["max_attempts"]; ok {
		n, err := strconv.Atoi(v.v)
		if err != nil || n < 1 || n > 1_000_000 {
			return Fleet{}, fmt.Errorf("%s: %s: max_attempts %q: want a whole number greater than 0", file, at("max_attempts").At(), v.v)
		}
		attempts = n
		p.took("retry.max_retries", strconv.Itoa(n-1), at("max_attempts")).by(afterComma, "less the first attempt")
	} else {
		p.dflt("retry.max_retries", "2", "max_attempts", "standard and adaptive make three attempts")
	}
	f.Retry.MaxRetries = attempts - 1
	f.Retry.Backoff = scenario.Backoff{Use: "exponential", Base: awsBackoffBase, Cap: awsMaxBackoff, Multiplier: 2, Jitter: "full"}
	p.note("retry.backoff", "exponential from 2s, full jitter, cap 20s", awsSDK+": rand x 2^n seconds before retry n (n = 1 first), at most 20s")
	p.lose("from the fifth retry on, %s waits exactly 20s; the simulator draws the wait from [0, 20s)", awsSDK)
	if o.Timeout > 0 {
		f.Timeout = o.Timeout
		p.note("timeout", fmtDur(o.Timeout), "the SDK config sets none: the caller's (--timeout)")
	} else {
		// The SDK's default: its HTTP client (aws-sdk-go-v2
		// aws/transport/http/client.go, BuildableClient) sets a dial and
		// a TLS handshake timeout but no overall request timeout, so an
		// attempt waits as long as the caller's context lets it.
		f.Timeout = maxTimeout
		p.add(Provenance{Settings: []string{"timeout"}, Value: "none (" + fmtDur(maxTimeout) + ", the simulator's longest)", Default: true,
			Rule: awsSDK + "'s HTTP client sets no overall request timeout; an attempt ends only at the caller's deadline"})
	}
	if attempts == 1 {
		f.Budget = scenario.Budget{Use: scenario.BudgetNone}
	}
	p.lose("the 2026 retry behaviour (AWS_NEW_RETRIES_2026: retry cost 14, 50ms base backoff) is opt-in and not imported")
	return Fleet{Fleet: f, Format: AWS, File: file, Origin: fmt.Sprintf("%s: profile %s", file, pr.name), From: p.list, Lost: p.lost}, nil
}
