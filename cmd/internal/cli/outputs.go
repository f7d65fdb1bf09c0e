package cli

import (
	"bytes"
	"slices"
	"strings"

	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/retrystorm/retrystorm/internal/outfile"
)

// checkOutputs makes sure, before a command runs, that what it will write
// can be written: the report's directory (--out, or the default), the
// findings file and the page's file. A run of minutes must not end in a
// failure to write that was plain from the start. It returns a usage
// error that says what to do.
func (inv *Invocation) checkOutputs() error {
	if inv.PrintConfig {
		return nil
	}
	if inv.flags.Lookup("out") != nil {
		if dir := inv.ReportDir(); dir != "" {
			if err := checkDir(dir); err != nil {
				if inv.Out == "" {
					return Usagef("cannot write the report in %s: %v; give --out DIR, or --json for none", dir, err)
				}
				return Usagef("--out %s: %v", dir, err)
			}
		}
	}
	inputs := inv.Inputs()
	for _, o := range inv.outputs() {
		if o.path == "" || o.path == "-" {
			continue
		}
		if err := checkFile(o.path); err != nil {
			return Usagef("%s %s: %v", o.flag, o.path, err)
		}
		if err := outfile.Check(o.path, o.kind, inputs); err != nil {
			return Usagef("%s %s %v", o.flag, o.path, err)
		}
	}
	return nil
}

// output is a file a command writes, from its flag.
type output struct {
	flag, path string
	kind       outfile.Kind
}

// outputs are the files the invocation's flags say it writes (not the
// report's directory).
func (inv *Invocation) outputs() []output {
	var out []output
	add := func(flag, path string, k outfile.Kind) {
		if path != "" && inv.flags.Lookup(strings.TrimLeft(flag, "-")) != nil {
			out = append(out, output{flag, path, k})
		}
	}
	add("--findings", inv.Findings, outfile.Findings)
	add("--sarif", inv.Configs.SARIF, outfile.SARIF)
	add("--junit", inv.Configs.JUnit, outfile.JUnit)
	add("--emit-worst", inv.Configs.EmitWorst, outfile.Scenario)
	add("--calibrated", inv.Calibrate.Calibrated, Calibrated)
	switch {
	case inv.Calibrate.Out != "":
		add("-o", inv.Calibrate.Out, Calibrated)
	case inv.Configs.Output != "":
		add("-o", inv.Configs.Output, outfile.Scenario)
	case inv.flags.Lookup("o") != nil:
		add("-o", cmpOr(inv.Output, "retrystorm.html"), outfile.Page)
	}
	return out
}

// Inputs are the files the invocation reads: its arguments and the files
// its flags name (the scenario, the base, the baseline, a stack's layers,
// saved answers, configs), for the outputs to keep clear of.
func (inv *Invocation) Inputs() []string {
	in := slices.Clone(inv.Args)
	for _, f := range []string{inv.Config, inv.Configs.Base, inv.Configs.Baseline} {
		if f != "" {
			in = append(in, f)
		}
	}
	for _, s := range inv.Configs.Stack {
		for _, layer := range strings.Split(s, ",") {
			in = append(in, strings.Split(strings.TrimSpace(layer), "+")...)
		}
	}
	in = append(in, inv.Calibrate.Files...)
	in = append(in, inv.Calibrate.Configs...)
	in = append(in, inv.Calibrate.Access.Files()...)
	return in
}

// Calibrated is a scenario calibrate wrote (calibrate -o, check
// --calibrated): only such a file is written over, not import's nor the
// user's own scenario.
var Calibrated = outfile.Kind{Name: "a scenario calibrate wrote", Is: func(b []byte) bool {
	return bytes.HasPrefix(b, []byte("# Calibrated by retrystorm"))
}}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// checkDir says why the report's directory dir cannot be written, or nil:
// it must be a directory one can write in, or not exist yet in a place
// where it can be made.
func checkDir(dir string) error {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		parent, err := existingParent(dir)
		if err != nil {
			return err
		}
		return probe(parent, "cannot make a directory in "+parent, "give a directory you can write in")
	case err != nil:
		return errors.New(reason(err))
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(dir)
		st, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("is a symbolic link to %s, which does not exist: remove the link, or give another directory", target)
		}
		if !st.IsDir() {
			return fmt.Errorf("is a symbolic link to the file %s, not a directory: give a directory (it is made if missing)", target)
		}
	case !fi.IsDir():
		return errors.New("is a file, not a directory: give a directory (it is made if missing)")
	}
	return probe(dir, "cannot write in it", "give a directory you can write in")
}

// checkFile says why the file path cannot be written, or nil: it must not
// be a directory, and its directory must exist and take new files (the
// file is written beside itself and renamed).
func checkFile(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return errors.New("is a directory: give a file name")
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("the directory %s does not exist", dir)
	case err != nil:
		return errors.New(reason(err))
	case !st.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	return probe(dir, "cannot write in "+dir, "give a file in a directory you can write in")
}

// existingParent returns the nearest ancestor of path that exists, which
// must be a directory.
func existingParent(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		st, err := os.Stat(dir)
		if err == nil {
			if !st.IsDir() {
				return "", fmt.Errorf("%s is a file, so no directory can be made under it", dir)
			}
			return dir, nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) || dir == filepath.Dir(dir) {
			return "", errors.New(reason(err))
		}
	}
}

// probe makes and removes a file in dir: the only sure test that a file
// can be written there (permissions, read-only mounts, /proc).
func probe(dir, what, advice string) error {
	f, err := os.CreateTemp(dir, ".retrystorm-probe-*")
	if err != nil {
		return fmt.Errorf("%s (%s): %s", what, reason(err), advice)
	}
	name := f.Name()
	f.Close()
	os.Remove(name)
	return nil
}

// reason is err without the path it names: the path may be a temporary
// name the user never gave.
func reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
