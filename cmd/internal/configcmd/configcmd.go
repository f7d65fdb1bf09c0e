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

	"github.com/retrystorm/retrystorm/cmd/internal/cli"
	"github.com/retrystorm/retrystorm/report"
	"github.com/retrystorm/retrystorm/report/document"
	"github.com/retrystorm/retrystorm/sim"
	"github.com/retrystorm/retrystorm/userconfig"
	"github.com/retrystorm/retrystorm/verdict"
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
type UsageError = userconfig.Error

func usagef(format string, args ...any) error { return userconfig.Errorf(format, args...) }

// The most a command reads of one file: a config (userconfig's limit) and
// a shard's JSON (an advise shard of 100 seeds holds 130,000 cells, about
// 35 MB of indented JSON).
const (
	maxConfigSize = userconfig.MaxConfigSize
	maxShardSize  = userconfig.MaxShardSize
)

// read reads the file name of at most limit bytes (userconfig.Reader).
func (o IO) read(name string, limit int64) ([]byte, error) { return o.reader().Read(name, limit) }

// reader reads the user's files as o says.
func (o IO) reader() userconfig.Reader { return userconfig.Reader{ReadFile: o.ReadFile} }

// ErrUnsafe is returned by Check when a verdict is at or past the level
// the check fails on (AT RISK by default, UNSAFE with --fail-on unsafe):
// exit status 1, after everything is printed.
var ErrUnsafe = errors.New("a verdict is at or past the level the check fails on (AT RISK, or UNSAFE with --fail-on unsafe)")

// costly turns a run refused for its cost (sim.CostError: one cell of the
// envelope would need more memory than --max-memory, or more work than a
// run may take) into a usage error, exit status 2 as run and sweep give:
// 1 means unsafe here.
func costly(err error) error {
	if errors.Is(err, verdict.ErrInput) {
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
	path, err := document.Write(dir, report.Page{Title: "retrystorm", Subtitle: sec.Title, Command: command, Sections: []report.Section{sec}})
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
		return cli.ErrVerdict
	}
	return err
}
