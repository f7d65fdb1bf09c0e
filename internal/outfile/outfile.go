// Package outfile writes the files a command outputs so that an output
// never costs the user an input: a path that names one of the command's
// inputs (after resolving links) is refused, an existing file that is not
// an earlier output of the same kind is refused (a slip such as `check
// --sarif route.yaml cluster.yaml` must not turn a config into SARIF), and
// the file is written beside its path and renamed into place, so that a
// symbolic link at the path is replaced, never followed.
package outfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Kind is a kind of output file: its name, in messages, and how to know
// an earlier one.
type Kind struct {
	Name string
	// Is reports whether the first bytes of a file (at most sniffBytes)
	// are of this kind.
	Is func(head []byte) bool
}

// sniffBytes is how much of an existing file Kind.Is looks at.
const sniffBytes = 64 << 10

// The kinds of output the commands write.
var (
	SARIF = Kind{"a SARIF log", func(b []byte) bool {
		var doc struct {
			Version string            `json:"version"`
			Runs    []json.RawMessage `json:"runs"`
		}
		return json.Unmarshal(b, &doc) == nil && doc.Version == "2.1.0" && doc.Runs != nil || bytes.Contains(b, []byte(`"version": "2.1.0"`)) && bytes.Contains(b, []byte(`"runs"`))
	}}
	JUnit = Kind{"a JUnit XML report", func(b []byte) bool {
		s := strings.TrimSpace(string(b))
		if strings.HasPrefix(s, "<?xml") {
			if i := strings.Index(s, "?>"); i >= 0 {
				s = strings.TrimSpace(s[i+2:])
			}
		}
		return strings.HasPrefix(s, "<testsuites") || strings.HasPrefix(s, "<testsuite")
	}}
	// Scenario is a scenario file retrystorm wrote: import's, calibrate's,
	// check --emit-worst's.
	Scenario = Kind{"a scenario file retrystorm wrote", func(b []byte) bool {
		return bytes.HasPrefix(b, []byte("# retrystorm scenario")) || bytes.HasPrefix(b, []byte("# Calibrated by retrystorm"))
	}}
	// Series is calibrate's rate series beside its scenario.
	Series = Kind{"a rate series calibrate wrote", func(b []byte) bool {
		return bytes.HasPrefix(b, []byte("# intents per second per step"))
	}}
	// Findings is `all --findings`' Markdown.
	Findings = Kind{"a findings file retrystorm wrote", func(b []byte) bool {
		return bytes.HasPrefix(b, []byte("# Findings\n\nWritten by `retrystorm all`"))
	}}
	// Page is the page command's HTML.
	Page = Kind{"a retrystorm page", func(b []byte) bool {
		return bytes.Contains(b, []byte("<title>retrystorm"))
	}}
)

// ErrInput is the error of a path that names one of the inputs.
var ErrInput = errors.New("is one of the command's inputs")

// Check says why path cannot be written as an output of kind k, or nil:
// it names one of inputs (the same file, links resolved), or an existing
// file that is not of kind k, or a directory. A path that does not exist
// yet, or is a symbolic link to nothing, can be written.
func Check(path string, k Kind, inputs []string) error {
	for _, in := range inputs {
		if same(path, in) {
			return fmt.Errorf("%w (%s): give another file", ErrInput, in)
		}
	}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		// The link is replaced, not followed; its target must not be an
		// input (checked above) and the link itself is no one's data.
		return nil
	case fi.IsDir():
		return errors.New("is a directory: give a file name")
	case !fi.Mode().IsRegular():
		return errors.New("is not a regular file")
	}
	head, err := sniff(path)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(head)) > 0 && !k.Is(head) {
		return fmt.Errorf("exists and is not %s: it is not overwritten (remove it, or give another name)", k.Name)
	}
	return nil
}

// Write checks path (Check) and writes data there: to a temporary file in
// its directory, then renamed over path, so that a symbolic link at path
// is replaced rather than followed, and a failure leaves what was there.
func Write(path string, k Kind, data []byte, inputs []string) error {
	if err := Check(path, k, inputs); err != nil {
		return fmt.Errorf("%s %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("%s: %w", path, unwrap(err))
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("%s: %w", path, unwrap(err))
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("%s: %w", path, unwrap(err))
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("%s: %w", path, unwrap(err))
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		var le *os.LinkError
		if errors.As(err, &le) {
			err = le.Err
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// same reports whether a and b name the same file, their links resolved:
// the same file by identity when both exist, else the same clean path.
func same(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(sa, sb)
	}
	ra, errA := filepath.Abs(a)
	rb, errB := filepath.Abs(b)
	return errA == nil && errB == nil && ra == rb
}

func sniff(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, unwrap(err)
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, sniffBytes))
}

// unwrap is err without the path it names: the path may be a temporary
// name the user never gave.
func unwrap(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
