// Package userconfig reads the retry configs a user gives a command, as
// every command reads them: scenario files as they are, and the configs of
// Envoy, Istio, Linkerd, gRPC and the AWS SDKs through the importer, each
// fleet with where its settings came from. check, advise, calibrate and
// replay --config, and the stack commands all read their files here, so
// that a file means the same to each of them.
package userconfig

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/internal/boundedfile"
	"github.com/retrystorm/retrystorm/internal/safetext"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/verdict"
)

// Error is a mistake in the command line or its input files: a command
// exits with status 2.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

// Errorf is an *Error.
func Errorf(format string, args ...any) error { return &Error{fmt.Sprintf(format, args...)} }

func usagef(format string, args ...any) error { return Errorf(format, args...) }

// Reader reads the user's files.
type Reader struct {
	// ReadFile reads an input file; nil means boundedfile.Read with the
	// limit for that kind of file.
	ReadFile func(name string) ([]byte, error)
}

// The most a command reads of one file: a config to import or check (the
// importers' own limit, importer/yamljson.go's maxFileBytes; a scenario
// given with --base has the loader's) and a shard's JSON (an advise shard
// of 100 seeds holds 130,000 cells, about 35 MB of indented JSON).
const (
	MaxConfigSize = 4 << 20
	MaxShardSize  = 64 << 20
)

// Read reads the file name of at most limit bytes: a regular file only
// (a named pipe would block the command, deaf to Ctrl-C; /dev/zero never
// ends). Its error names the file and is a usage error.
func (o Reader) Read(name string, limit int64) ([]byte, error) {
	var data []byte
	var err error
	if o.ReadFile != nil {
		data, err = o.ReadFile(name)
	} else {
		data, err = boundedfile.Read(name, limit)
	}
	if err != nil {
		return nil, usagef("%s: %v", safetext.Name(name), err)
	}
	return data, nil
}

// Base returns the scenario given with --base, or the embedded storm.
func (o Reader) Base(file string) (*scenario.Scenario, error) {
	if file != "" {
		if o.ReadFile == nil {
			return scenario.Load(file) // as run reads it, with its limit
		}
		data, err := o.Read(file, MaxConfigSize)
		if err != nil {
			return nil, usagef("--base %v", err)
		}
		return scenario.Parse(file, data)
	}
	e, ok := experiment.Lookup("storm")
	if !ok || e.Config == nil {
		return nil, errors.New("the embedded storm scenario is missing")
	}
	return scenario.Parse("storm.yaml", e.Config)
}

// Files are the config files read and the fleets imported from them,
// for advise to write its recommendation back into and for blame to
// locate settings in.
type Files struct {
	Sources []importer.Source
	Fleets  []importer.Fleet
}

// Imported returns the imported fleet a check input came from, if any.
func (u *Files) Imported(in verdict.CheckInput) (importer.Fleet, bool) {
	if u == nil {
		return importer.Fleet{}, false
	}
	for _, f := range u.Fleets {
		if f.Origin == in.Origin && f.Fleet.Name == in.Fleet.Name {
			return f, true
		}
	}
	return importer.Fleet{}, false
}

// Files reads the fleets of files: scenario files as they are,
// configs through the importer, with what assume says the configs do not
// (the services' protocol, the Istio release: check's and advise's
// --protocol and --istio).
func (o Reader) Files(files []string, format, baseFile string, assume importer.Options) ([]verdict.CheckInput, *scenario.Scenario, importer.Format, *Files, error) {
	var in []verdict.CheckInput
	var srcs []importer.Source
	var from *scenario.Scenario
	for _, f := range files {
		data, err := o.Read(f, MaxConfigSize)
		if err != nil {
			return nil, nil, "", nil, err
		}
		if format == "" || format == string(importer.ScenarioFleet) {
			sc, err := scenario.Parse(f, data)
			if err == nil {
				for _, fl := range sc.Fleets {
					in = append(in, verdict.CheckInput{Fleet: fl, Origin: f})
				}
				if from == nil {
					from = sc
				}
				continue
			}
			// A scenario file with a mistake gets the loader's error, not
			// the importer's "not a config".
			if _, derr := importer.Detect(f, data); format != "" || (derr != nil && looksLikeScenario(data)) {
				return nil, nil, "", nil, err
			}
		}
		srcs = append(srcs, Source(f, data))
	}
	b := from
	if baseFile != "" || b == nil {
		var err error
		if b, err = o.Base(baseFile); err != nil {
			return nil, nil, "", nil, err
		}
	}
	var fmtIn importer.Format = importer.ScenarioFleet
	if len(srcs) > 0 {
		opts := importer.Options{Protocol: assume.Protocol, IstioVersion: assume.IstioVersion}
		if format != "" {
			f, err := importer.ParseFormat(format)
			if err != nil {
				return nil, nil, "", nil, usagef("--format: %v", err)
			}
			opts.Format = f
		}
		fl, err := importer.Import(srcs, opts)
		if err != nil {
			return nil, nil, "", nil, usagef("%v", err)
		}
		for _, f := range fl {
			ci := verdict.CheckInput{Fleet: f.Fleet, Origin: f.Origin, FromBase: FromBase(f.From)}
			ci.Assume = AssumeTimeout(ci.Fleet, b)
			in = append(in, ci)
		}
		fmtIn = fl[0].Format
		if baseFile == "" && from == nil {
			b = withReplicas(b, fl)
		}
		return in, b, fmtIn, &Files{Sources: srcs, Fleets: fl}, nil
	}
	return in, b, fmtIn, nil, nil
}

// withReplicas gives the embedded base's origin the most replicas any
// imported fleet names (Envoy's endpoints, an nginx upstream's servers),
// as import does: the user's own number, not the base's.
func withReplicas(b *scenario.Scenario, fl []importer.Fleet) *scenario.Scenario {
	n := 0
	for _, f := range fl {
		n = max(n, f.Replicas)
	}
	if n <= max(b.Origin.Replicas, 1) || b.Origin.Replicas > 1 {
		return b
	}
	c := b.Clone()
	c.Origin.Replicas = min(n, maxReplicas)
	return c
}

// maxReplicas is the most replicas a scenario's origin takes.
const maxReplicas = 10_000

// FromBase lists the settings an imported fleet did not take from its
// file: those that took a documented default.
func FromBase(from []importer.Provenance) []string {
	var out []string
	for _, v := range from {
		if !v.Default {
			continue
		}
		for _, s := range v.Settings {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// Source is a config file to import, named as every message and comment
// will quote it: a name that is not printable UTF-8 (a file name on Unix
// may be any bytes) escaped, so that it neither reaches a terminal raw nor
// breaks the YAML written with it in its comments.
func Source(name string, data []byte) importer.Source {
	return importer.Source{Name: safetext.Escape(name), Data: data}
}

// looksLikeScenario reports whether a file has a scenario's top-level
// fleets list.
func looksLikeScenario(data []byte) bool {
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "fleets:") {
			return true
		}
	}
	return false
}

// Pick is the fleet a command starts from: the one route names (by
// fleet name, or a part of where it came from), else the first that
// retries, else the first.
func Pick(in []verdict.CheckInput, route string) (verdict.CheckInput, error) {
	if route != "" {
		var names []string
		for _, f := range in {
			if f.Fleet.Name == route {
				return f, nil
			}
			names = append(names, strconv.Quote(f.Fleet.Name))
		}
		for _, f := range in {
			if strings.Contains(f.Origin, route) {
				return f, nil
			}
		}
		return verdict.CheckInput{}, usagef("--route %q: no fleet of that name; the files give %s", route, strings.Join(names, ", "))
	}
	for _, f := range in {
		if f.Fleet.Retry.MaxRetries != 0 {
			return f, nil
		}
	}
	return in[0], nil
}

// noTimeout is how long an attempt of a fleet without a timeout may take
// (the importers' and the simulator's longest).
const noTimeout = 24 * time.Hour

// AssumeTimeout is what a verdict on fleet f rests on when f has no
// attempt timeout (its config cannot set one, or sets none, and the
// product's default is none, as the AWS SDKs' and Linkerd's): the same
// fleet with the base scenario's timeout, which a caller's deadline might
// give it. nil when f has a timeout or the base has none to give.
func AssumeTimeout(f scenario.Fleet, base *scenario.Scenario) *verdict.Assume {
	if f.Timeout < noTimeout || base == nil || len(base.Fleets) == 0 || base.Fleets[0].Timeout >= noTimeout {
		return nil
	}
	g := f
	g.Timeout = base.Fleets[0].Timeout
	return &verdict.Assume{Setting: "the attempt timeout", Value: "none (the product's default; your file sets none)",
		Other: fmt.Sprintf("%v (the base scenario's)", g.Timeout), Fleet: g}
}
