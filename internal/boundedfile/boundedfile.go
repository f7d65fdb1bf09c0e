// Package boundedfile reads the files a user names on the command line
// (scenarios, rate series, configs to import or check, shard results to
// merge) with a bound on what it costs: every one of them is read here.
//
// Read takes a regular file only, of at most a limit it is given, and
// reads at most the limit and one byte more: a file whose size says it is
// too large is refused before any of it is read, and one that grows while
// it is read as soon as it passes the limit. A directory, a named pipe, a
// device (/dev/zero) or a socket is refused without being read; a pipe is
// not even opened, since opening one with no writer would wait for ever,
// deaf to an interrupt.
package boundedfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// The refusals, for errors.Is.
var (
	ErrTooLarge   = errors.New("the file is too large")
	ErrDirectory  = errors.New("is a directory")
	ErrNotRegular = errors.New("is not a regular file (a named pipe, a device or a socket): give a file")
)

// tooLarge says by how much a file is too large: by its size when known,
// else because it went on past the limit.
type tooLarge struct {
	size, limit int64 // size < 0: unknown
}

func (e *tooLarge) Error() string {
	if e.size < 0 {
		return fmt.Sprintf("the file is too large: it goes on past the limit of %d bytes", e.limit)
	}
	return fmt.Sprintf("the file is too large (%d bytes; at most %d)", e.size, e.limit)
}

func (e *tooLarge) Is(target error) bool { return target == ErrTooLarge }

// cannotRead is an error of the system (no such file, permission denied),
// without the path: the caller names the file as it names it elsewhere.
type cannotRead struct{ err error }

func (e *cannotRead) Error() string { return "cannot read the file: " + e.err.Error() }
func (e *cannotRead) Unwrap() error { return e.err }

func cannot(err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		err = pe.Err
	}
	return &cannotRead{err}
}

// Read returns the contents of the regular file at path, of at most limit
// bytes. Its errors do not name the file (the caller does, with the name
// the user gave): [ErrTooLarge], [ErrDirectory] and [ErrNotRegular] for
// errors.Is, and "cannot read the file: ..." wrapping the system's error
// (so errors.Is(err, fs.ErrNotExist) works).
func Read(path string, limit int64) ([]byte, error) {
	// Stat first: a named pipe must not be opened at all.
	fi, err := os.Stat(path)
	if err != nil {
		return nil, cannot(err)
	}
	if err := regular(fi, limit); err != nil {
		return nil, err
	}
	f, err := openNoWait(path)
	if err != nil {
		return nil, cannot(err)
	}
	defer f.Close()
	// What was opened may not be what was looked at (a path swapped for a
	// pipe in between): look again at what is open.
	ofi, err := f.Stat()
	if err != nil {
		return nil, cannot(err)
	}
	if err := regular(ofi, limit); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, cannot(err)
	}
	if int64(len(data)) > limit {
		return nil, &tooLarge{size: -1, limit: limit}
	}
	return data, nil
}

// regular refuses what is not a regular file of at most limit bytes.
func regular(fi fs.FileInfo, limit int64) error {
	switch {
	case fi.IsDir():
		return ErrDirectory
	case !fi.Mode().IsRegular():
		return ErrNotRegular
	case fi.Size() > limit:
		return &tooLarge{size: fi.Size(), limit: limit}
	}
	return nil
}
