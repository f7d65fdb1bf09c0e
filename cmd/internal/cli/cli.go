// Package cli is the retrystorm command: the command table, flag parsing,
// help, dispatch and output, with every input and output passed in so that
// the tests drive it as a user would.
//
// The commands are listed in one table (commands.go). Commands whose
// dependencies are heavy run in a companion binary, retrystorm-full, so
// that the light retrystorm (the demo, the experiments, run, page) links
// only the standard library and the YAML parser; see companion.go.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/retrystorm/retrystorm/internal/safetext"
	"github.com/retrystorm/retrystorm/internal/suggest"
	"github.com/retrystorm/retrystorm/scenario"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // a claim does not hold, or the run failed
	exitUsage  = 2 // bad flags, arguments or input files
	// exitInconclusive is a lab run that could not measure: its load
	// generator or its servers ran late, or it used its cores up, so it
	// judged no claim (docs/lab.md).
	exitInconclusive = 3
)

// usageError is a mistake in the command line or its input files.
type usageError struct {
	cmd string // the command the user typed, or "" for none
	msg string
}

func (e *usageError) Error() string { return e.msg }

// Usagef returns a usage error (exit status 2) for a run function: a
// mistake in the command line or in what it names.
func Usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// ErrClaims is what a run function returns, after printing everything,
// when a claim does not hold (exit status 1).
var ErrClaims = errors.New("a claim does not hold")

// ErrVerdict is what check returns, after printing everything, when a
// verdict is at or past the level it fails on (exit status 1).
var ErrVerdict = errors.New("a verdict fails")

// ErrInconclusive is what a lab run returns, after printing everything,
// when it could not measure (exit status 3): no claim was judged.
var ErrInconclusive = errors.New("the lab could not measure: inconclusive")

// exitStatus is a run that has already said why it ended, with the
// status to exit with (a companion's).
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// Main runs the command line args (without the program name), with the
// heavy commands h has, and returns the exit status: 0 when every claim
// holds, 1 when one does not or the run failed, 2 for a usage error.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, h Heavy) int {
	return mainWith(ctx, args, stdout, stderr, h, exitUsage)
}

// mainWith is Main with usage as the status for a usage error. A
// companion's status is passed on as it is: it runs in the same
// convention (see Launch).
func mainWith(ctx context.Context, args []string, stdout, stderr io.Writer, h Heavy, usage int) int {
	inv, err := run(ctx, args, stdout, stderr, h)
	if err != nil {
		// Messages quote file names and values from outside: none of
		// their control characters may reach the terminal raw.
		err = escapedError{err}
	}
	code, msg := verdict(inv, err)
	if msg != "" {
		io.WriteString(stderr, fit(msg, textWidth(stderr))+"\n")
	}
	if code == exitUsage && !errors.As(err, new(exitStatus)) {
		code = usage
	}
	return code
}

// verdict is the exit status for a command's error, and what to say.
func verdict(inv *Invocation, err error) (int, string) {
	var ue *usageError
	var se *scenario.Error
	var es exitStatus
	switch {
	case err == nil:
		return exitOK, ""
	case errors.Is(err, flag.ErrHelp):
		return exitOK, ""
	case errors.As(err, &es):
		return int(es), ""
	case errors.Is(err, ErrVerdict):
		return exitFailed, "retrystorm: a verdict is AT RISK or UNSAFE (see above; --fail-on unsafe lets AT RISK pass)"
	case errors.Is(err, ErrClaims):
		return exitFailed, "retrystorm: at least one claim does not hold (see above)"
	case errors.Is(err, ErrInconclusive):
		return exitInconclusive, "retrystorm: inconclusive: the lab was not measuring the service (see above); no claim was judged"
	case errors.As(err, &ue):
		cmd := ue.cmd
		if cmd == "" && inv != nil {
			cmd = inv.cmdName()
		}
		if cmd == "" || cmd == "help" {
			// help has no flags to show: its mistakes (help strom) are
			// about the list of commands.
			return exitUsage, fmt.Sprintf("retrystorm: %v\nRun 'retrystorm help' for usage.", err)
		}
		// A package named as its command prefixes its own errors (calibrate:
		// ...): say the command's name once.
		msg := strings.TrimPrefix(err.Error(), cmd+": ")
		return exitUsage, fmt.Sprintf("retrystorm %s: %s\nRun 'retrystorm help %s' for its flags.", cmd, msg, cmd)
	case errors.As(err, &se):
		return exitUsage, fmt.Sprintf("retrystorm: %v", err)
	case errors.Is(err, context.Canceled):
		return exitFailed, "retrystorm: interrupted"
	}
	return exitFailed, fmt.Sprintf("retrystorm: %v", err)
}

// escapedError prints its error with control and invisible characters
// escaped, but for the line breaks of a message of several lines; errors.Is
// and errors.As see through it.
type escapedError struct{ err error }

func (e escapedError) Error() string {
	lines := strings.Split(e.err.Error(), "\n")
	for i, l := range lines {
		lines[i] = safetext.Escape(l)
	}
	return strings.Join(lines, "\n")
}
func (e escapedError) Unwrap() error { return e.err }

// run parses args and runs the command they name, returning the
// invocation (nil when there was none) and the command's error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, h Heavy) (*Invocation, error) {
	cmds := table(h)
	inv := &Invocation{Name: "demo", Stdout: stdout, Stderr: stderr, argv: args, table: cmds}
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		// As most commands take it: a synonym of the version command.
		args = []string{"version"}
	}
	rest := args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		inv.Name, inv.typed, rest = args[0], true, args[1:]
	}
	c, ok := lookup(cmds, inv.Name)
	if !ok {
		var names []string
		for _, c := range cmds {
			names = append(names, c.Name)
		}
		msg := fmt.Sprintf("unknown command %q", inv.Name)
		if s := suggest.Closest(inv.Name, names); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		return nil, Usagef("%s", msg)
	}
	if err := parse(c, rest, inv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			if inv.typed {
				return inv, commandHelp(stdout, c, inv.flags)
			}
			// retrystorm -h: the whole list, not only the demo's flags.
			return inv, mainHelp(stdout, cmds)
		}
		return inv, err
	}
	if err := inv.checkOutputs(); err != nil {
		return inv, err
	}
	if c.Run == nil {
		return inv, runCompanion(ctx, inv)
	}
	return inv, c.Run(ctx, inv)
}

func lookup(cmds []command, name string) (command, bool) {
	for _, c := range cmds {
		if c.Name == name {
			return c, true
		}
	}
	return command{}, false
}

// cmdName is the command as the user typed it, or "" for the default.
func (inv *Invocation) cmdName() string {
	if !inv.typed {
		return ""
	}
	return inv.Name
}

// NoArgs returns a usage error when positional arguments were given.
func (inv *Invocation) NoArgs() error {
	if len(inv.Args) > 0 {
		return Usagef("%s takes no arguments, got %q", inv.Name, strings.Join(inv.Args, " "))
	}
	return nil
}
