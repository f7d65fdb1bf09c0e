package cli

import (
	"errors"
	"flag"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The flags of the commands that read a window of metrics: calibrate,
// replay, and check --prometheus (flags.go has the others).

// CalibrateFlags are calibrate's flags.
type CalibrateFlags struct {
	Prometheus string   // --prometheus URL
	Files      []string // --file, repeated
	From, To   time.Time
	Step       time.Duration
	Selector   string
	Source     string // envoy, grpc, haproxy, resil, lab or auto
	Out        string // -o FILE; empty: standard output
	Timeout    time.Duration
	// Configs are --config, repeated: the user's own config files, whose
	// retry policy replaces the defaults; Route (--route) picks one of
	// their fleets.
	Configs []string
	Route   string
	// Access is how to reach a Prometheus that asks for credentials.
	Access AccessFlags
	// Calibrated is check --calibrated FILE: where check --prometheus
	// keeps the base it calibrated; empty keeps none.
	Calibrated string
}

// AccessFlags are the credentials and the CA of a Prometheus server
// (calibrate.Access, which applies them): file names, and the headers.
type AccessFlags struct {
	HTTPConfig      string   // --http-config FILE
	BearerTokenFile string   // --bearer-token-file FILE
	BasicAuth       string   // --basic-auth USER
	PasswordFile    string   // --basic-auth-password-file FILE
	Headers         []string // --header 'Name: value', repeated
	CAFile          string   // --ca-file FILE
}

// Files are the files the flags name: inputs, which no output may
// overwrite.
func (a AccessFlags) Files() []string {
	var out []string
	for _, f := range []string{a.HTTPConfig, a.BearerTokenFile, a.PasswordFile, a.CAFile} {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}

// calibrateFlags are the window's flags and the file to write.
func calibrateFlags(fs *flag.FlagSet, inv *Invocation) {
	windowFlags(fs, inv)
	policyFlags(fs, inv)
	fileVar(fs, &inv.Calibrate.Out, "o", "write the scenario to `FILE` (and a varying rate beside it, as FILE's name.rates.csv) instead of standard output", "")
}

// replayFlags are replay's own.
func replayFlags(fs *flag.FlagSet, inv *Invocation) {
	policyFlags(fs, inv)
	fs.BoolVar(&inv.ReplayNoAdvise, "no-advise", false, "leave out advise's recommendation (its search takes seconds, more on a long window)")
}

// policyFlags take the client's retry policy from the user's own
// config (calibrate and replay), read as check and advise read it.
func policyFlags(fs *flag.FlagSet, inv *Invocation) {
	c := &inv.Calibrate
	funcVar(fs, "config", "take the retry policy (timeouts, retries, backoff, budget, breaker, hedging) from your config `FILE` (Envoy, Istio, gRPC service config, or a scenario file), as check reads it, instead of defaults; repeat it for a route and its cluster in two files", func(s string) error {
		if s == "" {
			return errors.New("needs a file name")
		}
		c.Configs = append(c.Configs, s)
		return nil
	})
	fs.StringVar(&c.Route, "route", "", "with --config, the route or fleet `NAME` the metrics are from, when the config holds several")
}

// windowFlags say which window of metrics to read, live or saved, and
// how to reach the server (calibrate, replay, check --prometheus).
func windowFlags(fs *flag.FlagSet, inv *Invocation) {
	c := &inv.Calibrate
	shownVar(fs, "prometheus", "read the metrics from the Prometheus server at `URL` (its HTTP API)", func(s string) error {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("want an http:// or https:// URL with a host")
		}
		c.Prometheus = s
		return nil
	}, func(s string) string {
		// A password in the URL is not shown where the command line is
		// (the report's).
		if u, err := url.Parse(s); err == nil {
			return u.Redacted()
		}
		return "URL"
	})
	funcVar(fs, "file", "read a saved query_range answer from `FILE` (JSON), or every *.json of a directory; repeat it for more", func(s string) error {
		if s == "" {
			return errors.New("needs a file or a directory")
		}
		c.Files = append(c.Files, s)
		return nil
	})
	when := func(name, usage string, p *time.Time) {
		funcVar(fs, name, usage, func(s string) error {
			t, err := parseTime(s)
			*p = t
			return err
		})
	}
	when("from", "start the window at `T`: RFC 3339 (2026-11-30T14:00:00Z), Unix seconds, or a duration ago such as 1h (default: --to less 1h)", &c.From)
	when("to", "end the window at `T`, as --from (default: now)", &c.To)
	funcVar(fs, "step", "read one sample every `D` (default: the window over 240, at least 1s)", func(s string) error {
		d, err := parseDuration(s)
		c.Step = d
		return err
	})
	fs.StringVar(&c.Selector, "selector", "", "narrow every metric to the series `SEL` matches, such as {job=\"checkout\"}")
	c.Source = "auto"
	funcVar(fs, "source", "read the metrics of `S`: envoy, grpc, haproxy, resil, lab or auto (default auto: the first found)", func(s string) error {
		switch s {
		case "envoy", "grpc", "haproxy", "resil", "lab", "auto":
		default:
			return errors.New("want envoy, grpc, haproxy, resil, lab or auto")
		}
		c.Source = s
		return nil
	})
	funcVar(fs, "timeout", "give up on a request to Prometheus after `D` (default 30s)", func(s string) error {
		d, err := parseDuration(s)
		c.Timeout = d
		return err
	})
	accessFlags(fs, inv)
}

// accessFlags say how to reach a Prometheus that asks for credentials, as
// Prometheus's own http_config says it (docs/calibrate.md).
func accessFlags(fs *flag.FlagSet, inv *Invocation) {
	a := &inv.Calibrate.Access
	fileVar(fs, &a.BearerTokenFile, "bearer-token-file", "send the token in `FILE` as Authorization: Bearer to Prometheus", "")
	fs.StringVar(&a.BasicAuth, "basic-auth", "", "authenticate to Prometheus as `USER` (HTTP basic auth), with --basic-auth-password-file")
	fileVar(fs, &a.PasswordFile, "basic-auth-password-file", "the password of --basic-auth is in `FILE`", "")
	shownVar(fs, "header", "send the header `'Name: value'` to Prometheus (repeat it for more; its value is never printed)", func(s string) error {
		// Checked with the others (calibrate.Access): an error here
		// would quote the value, which may be a secret.
		a.Headers = append(a.Headers, s)
		return nil
	}, func(s string) string {
		name, _, _ := strings.Cut(s, ":")
		return strings.TrimSpace(name) + ": …"
	})
	fileVar(fs, &a.CAFile, "ca-file", "trust the CA certificate in `FILE` (PEM) for Prometheus's TLS certificate", "")
	fileVar(fs, &a.HTTPConfig, "http-config", "reach Prometheus as the http_config in `FILE` says (Prometheus's own YAML: basic_auth, authorization, tls_config, http_headers, proxy_url...)", "")
}

// checkWindowFlags are check's flags for a base calibrated on the spot
// from Prometheus (--prometheus) or saved answers (--file).
func checkWindowFlags(fs *flag.FlagSet, inv *Invocation) {
	windowFlags(fs, inv)
	fs.StringVar(&inv.Calibrate.Route, "route", "", "with --prometheus or --file, the route or fleet `NAME` of your files the metrics are from, when they hold several")
	fileVar(fs, &inv.Calibrate.Calibrated, "calibrated", "with --prometheus or --file, also write the base calibrated from the metrics to `FILE` (as calibrate -o writes it)", "")
}

// parseTime reads a time: RFC 3339, Unix seconds, or a duration before now.
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 && f < 1e11 {
		return time.Unix(0, int64(f*1e9)), nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return time.Now().Add(-d), nil
	}
	return time.Time{}, errors.New("want RFC 3339 (2026-11-30T14:00:00Z), Unix seconds, or a duration ago (1h)")
}
