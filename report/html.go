package report

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Section is one experiment's part of a report.
type Section struct {
	ID     string
	Title  string
	Intro  []string // paragraphs, plain text
	Tables []Table
	Claims []Claim
	Charts []Chart
	// Figures are pre-rendered SVG (heatmaps and other non-line charts).
	Figures []SVG
	Notes   []string
}

// SVG is markup that package report drew (a heatmap, a chart): trusted,
// and written into an HTML report as it is.
type SVG string

// Page is a whole report.
type Page struct {
	Title    string
	Subtitle string
	Command  string // the command line that produced it
	Findings []string
	Sections []Section
}

// WriteFileAtomicMkdir is WriteFileAtomic, making path's directory first.
func WriteFileAtomicMkdir(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return WriteFileAtomic(path, data)
}

// WriteFileAtomic writes data to a temporary file beside path and renames
// it over path. Its errors name path, never the temporary file.
func WriteFileAtomic(path string, data []byte) error {
	fail := func(err error) error {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("report: writing %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fail(err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		var le *os.LinkError
		if errors.As(err, &le) {
			err = le.Err
		}
		return fail(err)
	}
	return nil
}
