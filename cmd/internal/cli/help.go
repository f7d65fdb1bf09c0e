package cli

import (
	"context"
	"flag"
	"io"
	"strings"

	"github.com/retrystorm/retrystorm/report"
)

// runHelp is `retrystorm help [COMMAND]`.
func runHelp(_ context.Context, inv *Invocation) error {
	switch len(inv.Args) {
	case 0:
		return mainHelp(inv.Stdout, inv.table)
	case 1:
	default:
		return Usagef("help takes one command, got %q", strings.Join(inv.Args, " "))
	}
	c, ok := lookup(inv.table, inv.Args[0])
	if !ok {
		_, err := run(context.Background(), inv.Args[:1], io.Discard, io.Discard, Heavy{})
		return err // unknown command, with a "did you mean"
	}
	helpInv := &Invocation{Name: c.Name, typed: true, table: inv.table}
	if err := parse(c, nil, helpInv); err != nil {
		return err
	}
	return commandHelp(inv.Stdout, c, helpInv.flags)
}

// mainHelp lists every command, heavy ones included, and the experiments'
// flags.
func mainHelp(w io.Writer, cmds []command) error {
	width := textWidth(w)
	var b strings.Builder
	b.WriteString("retrystorm: see a retry storm, and measure what each defence costs.\n\n")
	b.WriteString("Usage:\n")
	for _, u := range [][2]string{
		{"retrystorm [flags]", "the demo: storm and fleets, tables, an HTML report"},
		{"retrystorm COMMAND [flags]", ""},
		{"retrystorm help COMMAND", "a command's flags"},
	} {
		b.WriteString(item(u[0], u[1], 29, width))
	}
	b.WriteString("\nCommands:\n")
	heavy := false
	// The summaries start two columns after the longest name (calibrate).
	nameCol := 11
	for _, c := range cmds {
		nameCol = max(nameCol, 2+len(c.Name)+2)
	}
	for _, c := range cmds {
		if c.Name == "demo" {
			continue
		}
		s := c.Summary
		if c.Heavy {
			s += " [*]"
			heavy = true
		}
		b.WriteString(item(c.Name, s, nameCol, width))
	}
	if heavy {
		b.WriteString("\n" + report.Wrap("[*] runs in the companion binary retrystorm-full, which links the heavier dependencies these commands need; retrystorm finds it beside itself or on the PATH, and builds it when run from a checkout.", width, "", "") + "\n")
	}
	b.WriteString("\nFlags of the experiments (run and the demo take --json, --seed and --out):\n")
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	for _, g := range []flagGroup{outputFlags, configFlags} {
		g(fs, &Invocation{})
	}
	b.WriteString(flagList(fs, width))
	b.WriteString("\n" + report.Wrap("Exit status: 0 when every claim holds; 1 when one does not (after printing everything) or the run failed; 2 for a usage error or an invalid scenario file; 3 when the lab could not measure (inconclusive).", width, "", "") + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// commandHelp is one command's usage, description and flags.
func commandHelp(w io.Writer, c command, fs *flag.FlagSet) error {
	width := textWidth(w)
	var b strings.Builder
	usage := "retrystorm " + c.Name
	if c.Args != "" {
		usage += " " + c.Args
	}
	if fs != nil && hasFlags(fs) {
		usage += " [flags]"
	}
	b.WriteString(report.Wrap("Usage: "+usage, width, "", "  ") + "\n\n")
	b.WriteString(report.Wrap(upper(c.Summary)+".", width, "", "") + "\n")
	for _, p := range strings.Split(strings.TrimSpace(c.About), "\n\n") {
		if p != "" {
			b.WriteString("\n" + report.Wrap(p, width, "", "") + "\n")
		}
	}
	if c.Heavy {
		b.WriteString("\n" + report.Wrap("It runs in the companion binary retrystorm-full, which links its heavier dependencies: retrystorm finds it beside itself or on the PATH, and builds it when run from a checkout.", width, "", "") + "\n")
	}
	if fs != nil && hasFlags(fs) {
		b.WriteString("\nFlags:\n")
		b.WriteString(flagList(fs, width))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// flagList lists fs's flags as the README writes them (--flag VALUE), each
// with its usage wrapped beside it.
func flagList(fs *flag.FlagSet, width int) string {
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		head := dash(f.Name)
		if name != "" {
			head += " " + name
		}
		b.WriteString(item(head, usage, 20, width))
	})
	return b.String()
}

// item is one entry of a list: two spaces, the head padded to col
// columns, and the text wrapped in the remaining width, under itself.
func item(head, text string, col, width int) string {
	line := "  " + head
	n := len([]rune(line))
	if text == "" {
		return line + "\n"
	}
	indent := strings.Repeat(" ", col)
	if n+1 > col {
		// The head is too long to share its line.
		return line + "\n" + report.Wrap(text, width, indent, indent) + "\n"
	}
	return report.Wrap(text, width, line+strings.Repeat(" ", col-n), indent) + "\n"
}

func upper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
