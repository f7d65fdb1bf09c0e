package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
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
	if inv.Findings != "" {
		if err := checkFile(inv.Findings); err != nil {
			return Usagef("--findings %s: %v", inv.Findings, err)
		}
	}
	if inv.flags.Lookup("o") != nil {
		if err := checkFile(inv.Output); err != nil {
			return Usagef("-o %s: %v", inv.Output, err)
		}
	}
	return nil
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
