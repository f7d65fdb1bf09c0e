package cli

func init() {
	extraFlags["sweep"] = func(cl *commandLine) {
		cl.flags.IntVar(&cl.grid, "grid", 0, "cells per axis of the sweep's map (default 40)")
	}
}
