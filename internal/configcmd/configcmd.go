// Package configcmd is the commands that read the retry settings people
// run: import, check, advise, and merge of their shards. They link the
// importers (Envoy's and Istio's generated protobuf code), so they belong
// to the companion binary for heavy commands, not the light demo:
// internal/cli/full sets Import, Check, Advise and Merge as its run
// functions. One file per command holds its entry point, its options and
// its logic (import.go, check.go, advise.go, merge.go); this one what they
// share. Their flags, and the ranges those take, are internal/cli's
// (flags.go), the one place a command's flags are defined and checked,
// since the light binary parses them too; the options here are what it
// parsed. The Run functions take every input and output as arguments.
package configcmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/internal/boundedfile"
	"github.com/retrystorm/retrystorm/internal/cli"
	"github.com/retrystorm/retrystorm/internal/safetext"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/sim"
)

// IO is what a command reads and writes.
type IO struct {
	Stdout, Stderr io.Writer
	// Style draws the tables (colour on a terminal).
	Style report.Style
	// Progress, if set, is told how far a long run has come; the caller
	// draws it on a terminal and sets nothing when output is piped or
	// JSON.
	Progress func(done, total int)
	// ReadFile reads an input file; nil means boundedfile.Read with the
	// limit for that kind of file.
	ReadFile func(name string) ([]byte, error)
}

// UsageError is a mistake in the command line or its input files: exit
// status 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, args ...any) error { return &UsageError{fmt.Sprintf(format, args...)} }

// ErrUnsafe is returned by Check when a fleet stays collapsed in the
// region the user calls realistic: exit status 1, after everything is
// printed.
var ErrUnsafe = errors.New("a fleet stays collapsed, or amplifies the load past the thresholds, in the realistic region")

// The most a command reads of one file: a config to import or check (the
// importers' own limit, importer/yamljson.go's maxFileBytes; a scenario
// given with --base has the loader's) and a shard's JSON (an advise shard
// of 100 seeds holds 130,000 cells, about 35 MB of indented JSON).
const (
	maxConfigSize = 4 << 20
	maxShardSize  = 64 << 20
)

// read reads the file name of at most limit bytes: a regular file only
// (a named pipe would block the command, deaf to Ctrl-C; /dev/zero never
// ends). Its error names the file and is a usage error.
func (o IO) read(name string, limit int64) ([]byte, error) {
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

// base returns the scenario given with --base, or the embedded storm.
func base(o IO, file string) (*scenario.Scenario, error) {
	if file != "" {
		if o.ReadFile == nil {
			return scenario.Load(file) // as run reads it, with its limit
		}
		data, err := o.read(file, maxConfigSize)
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

// inputs reads the files to check or advise on: scenario files give their
// fleets (and the first one is the base, unless --base says otherwise);
// config files are imported.
// userFiles are the config files read and the fleets imported from them,
// for advise to write its recommendation back into.
type userFiles struct {
	srcs   []importer.Source
	fleets []importer.Fleet
}

// imported returns the imported fleet a check input came from, if any.
func (u *userFiles) imported(in experiment.CheckInput) (importer.Fleet, bool) {
	if u == nil {
		return importer.Fleet{}, false
	}
	for _, f := range u.fleets {
		if f.Origin == in.Origin && f.Fleet.Name == in.Fleet.Name {
			return f, true
		}
	}
	return importer.Fleet{}, false
}

// inputFiles reads the fleets of files: scenario files as they are,
// configs through the importer, with what assume says the configs do not
// (the services' protocol, the Istio release: check's and advise's
// --protocol and --istio).
func inputFiles(o IO, files []string, format, baseFile string, assume importer.Options) ([]experiment.CheckInput, *scenario.Scenario, importer.Format, *userFiles, error) {
	var in []experiment.CheckInput
	var srcs []importer.Source
	var from *scenario.Scenario
	for _, f := range files {
		data, err := o.read(f, maxConfigSize)
		if err != nil {
			return nil, nil, "", nil, err
		}
		if format == "" || format == string(importer.ScenarioFleet) {
			sc, err := scenario.Parse(f, data)
			if err == nil {
				for _, fl := range sc.Fleets {
					in = append(in, experiment.CheckInput{Fleet: fl, Origin: f})
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
		srcs = append(srcs, source(f, data))
	}
	b := from
	if baseFile != "" || b == nil {
		var err error
		if b, err = base(o, baseFile); err != nil {
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
		if len(b.Fleets) > 0 {
			opts.Timeout = b.Fleets[0].Timeout
		}
		fl, err := importer.Import(srcs, opts)
		if err != nil {
			return nil, nil, "", nil, usagef("%v", err)
		}
		for _, f := range fl {
			in = append(in, experiment.CheckInput{Fleet: f.Fleet, Origin: f.Origin, FromBase: fromBase(f.From)})
		}
		fmtIn = fl[0].Format
		return in, b, fmtIn, &userFiles{srcs: srcs, fleets: fl}, nil
	}
	return in, b, fmtIn, nil, nil
}

// fromBase lists the settings an imported fleet did not take from its
// file, from its provenance lines ("setting: value  <- where"): those
// from a documented default or from the base scenario.
func fromBase(from []string) []string {
	var out []string
	for _, l := range from {
		setting, _, ok := strings.Cut(l, ": ")
		_, where, _ := strings.Cut(l, "  <- ")
		if !ok || !(strings.HasPrefix(where, "default") || strings.Contains(where, "the base scenario's")) {
			continue
		}
		for _, s := range strings.Split(setting, " and ") {
			if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// source is a config file to import, named as every message and comment
// will quote it: a name that is not printable UTF-8 (a file name on Unix
// may be any bytes) escaped, so that it neither reaches a terminal raw nor
// breaks the YAML written with it in its comments.
func source(name string, data []byte) importer.Source {
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

// costly turns a run refused for its cost (sim.CostError: one cell of the
// envelope would need more memory than --max-memory, or more work than a
// run may take) into a usage error, exit status 2 as run and sweep give:
// 1 means unsafe here.
func costly(err error) error {
	if errors.Is(err, experiment.ErrInput) {
		return usagef("%v", err)
	}
	if ce, ok := errors.AsType[*sim.CostError](err); ok {
		if ce.Memory {
			return usagef("%v (--max-memory sets the limit)", err)
		}
		return usagef("%v", err)
	}
	return err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeReport(o IO, dir string, sec report.Section, command string) error {
	if dir == "" {
		return nil
	}
	path, err := report.Write(dir, report.Page{Title: "retrystorm", Subtitle: sec.Title, Command: command, Sections: []report.Section{sec}})
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Stderr, "report: %s\n", filepath.Clean(path))
	return nil
}

// configIO is the IO of a command run from the command line, with a
// progress bar labelled label on a terminal.
func configIO(inv *cli.Invocation, label string) (IO, func()) {
	update, clear := inv.Progress(label)
	return IO{Stdout: inv.Stdout, Stderr: inv.Stderr, Style: inv.Style(), Progress: update}, clear
}

// configErr maps configcmd's errors to the command line's: a usage error
// is exit status 2, an unsafe config 1 (everything was printed).
func configErr(err error) error {
	var ue *UsageError
	switch {
	case errors.As(err, &ue):
		return cli.Usagef("%s", ue.Msg)
	case errors.Is(err, ErrUnsafe):
		return cli.ErrClaims
	}
	return err
}
