package configcmd

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/grid"
	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/importer/kube"
	"github.com/retrystorm/retrystorm/scenario"
	"github.com/retrystorm/retrystorm/userconfig"
	"github.com/retrystorm/retrystorm/verdict"
)

// CI are the options of check that make it a gate in CI, and check a
// stack of files as one call chain.
type CI struct {
	// Stack lists the layers of one call chain, outermost first, each a
	// file (or files joined with "+", as an Envoy route and its cluster):
	// --stack a,b,c or --stack repeated.
	Stack []string
	// SARIF, JUnit: files to write the verdicts to (--sarif, --junit).
	SARIF, JUnit string
	// Baseline is a previous check --json: fail only on what got worse.
	Baseline string
	// Manifests is a directory of Kubernetes manifests to find the
	// chains in (--manifests, manifests.go).
	Manifests string
	// MaxRuns refuses a check of a stack or of manifests that would make
	// more simulations (--max-runs); zero means 20,000.
	MaxRuns int
	// FailOnUnsafe: exit 1 on UNSAFE only (--fail-on unsafe); AT RISK
	// then exits 0.
	FailOnUnsafe bool
	// EmitWorst is a file to write the worst cell to, as a scenario
	// (--emit-worst).
	EmitWorst string
	// Instances gives each --stack layer its instances, outermost first
	// (--instances); 0 or none: one per client instance.
	Instances []int
	// Inputs are every file the command reads (its arguments, --base,
	// --baseline, the stack's layers): no output is written over one.
	Inputs []string
}

// failOn is the level from which a verdict fails the command.
func (c CI) failOn() verdict.Level {
	if c.FailOnUnsafe {
		return verdict.Unsafe
	}
	return verdict.AtRisk
}

// SplitStack splits --stack values ("a,b", given once or more) into the
// layers, in order; empty names are refused.
func SplitStack(values []string) ([]string, error) {
	var out []string
	for _, v := range values {
		for _, l := range strings.Split(v, ",") {
			if l = strings.TrimSpace(l); l == "" {
				return nil, usagef("--stack %q: an empty layer: give files separated by commas, outermost first", v)
			}
			out = append(out, l)
		}
	}
	return out, nil
}

// stackLoop returns the loop when a file is a layer twice: a call chain
// that comes back to a layer calls itself for ever.
func stackLoop(layers []string) []string {
	seen := map[string]int{}
	for i, l := range layers {
		for _, f := range strings.Split(l, "+") {
			// A file and a link to it are the same layer.
			k, err := filepath.EvalSymlinks(f)
			if err != nil {
				k = f
			}
			if abs, err := filepath.Abs(k); err == nil {
				k = abs
			}
			if j, ok := seen[k]; ok && j != i {
				return append(append([]string(nil), layers[j:i]...), layers[i])
			}
			seen[k] = i
		}
	}
	return nil
}

// RunStack checks the layers of c.Stack as one call chain: each layer's
// files imported on their own (each its own format), the first fleet
// that retries in each the layer's policy.
func RunStack(ctx context.Context, files []string, c CheckOptions, o IO) error {
	st, err := readStack(o, "check", files, c)
	if err != nil {
		return err
	}
	var layers []verdict.StackLayer
	for _, l := range st.files {
		layers = append(layers, l.layer)
	}
	co := verdict.CheckOptions{Base: st.base, Load: c.Load, Dip: c.Dip, Seeds: c.Seeds, Clients: c.Clients, FullRuns: c.FullRuns}
	if len(c.Instances) > 0 && c.Instances[0] > 0 {
		// The outermost layer's instances are the clients: each runs
		// the fleet's policy with its own budget and breaker.
		if c.Clients != 0 && c.Clients != c.Instances[0] {
			return usagef("--instances gives the outermost layer %d instances and --clients %d: they are the same count (the outermost layer's instances are the client instances); give one", c.Instances[0], c.Clients)
		}
		co.Clients = c.Instances[0]
	}
	set := chainSet{source: "--stack " + strings.Join(st.names, ","), single: true, chains: [][]verdict.StackLayer{layers}}
	return c.runChains(ctx, o, set, co, st.opts, st.shard)
}

// stack is a --stack as read: its layers' names and files, the base
// scenario, and the run's options.
type stack struct {
	names []string
	files []stackFile
	base  *scenario.Scenario
	opts  experiment.Options
	shard grid.Shard
}

// readStack reads c.Stack for command (check or advise): the layers in
// order, each imported on its own; a loop, a stack of one layer or more
// than nine, and files given as arguments are usage errors.
func readStack(o IO, command string, files []string, c CheckOptions) (*stack, error) {
	if len(files) > 0 {
		return nil, usagef("%s --stack takes its files in --stack, not as arguments (%s): --stack %s", command, strings.Join(files, " "), strings.Join(append(append([]string(nil), c.Stack...), files...), ","))
	}
	names, err := SplitStack(c.Stack)
	if err != nil {
		return nil, err
	}
	if len(names) < 2 {
		return nil, usagef("--stack %s: a stack is two layers or more, outermost first (for one file: retrystorm %s FILE)", strings.Join(names, ","), command)
	}
	if len(names) > scenario.MaxTiers+1 {
		return nil, usagef("--stack: %d layers: at most %d (nine layers retrying three times each send 262,144 attempts per intent)", len(names), scenario.MaxTiers+1)
	}
	if loop := stackLoop(names); loop != nil {
		return nil, usagef("--stack: the chain loops: %s: a layer cannot call itself through the others", strings.Join(loop, " → "))
	}
	opts, sh, err := c.options(o)
	if err != nil {
		return nil, err
	}
	b, err := o.reader().Base(c.Base)
	if err != nil {
		return nil, err
	}
	if c.Seed != nil {
		b.Seed = *c.Seed
	}
	if len(c.Instances) > 0 && len(c.Instances) != len(names) {
		return nil, usagef("--instances gives %d counts for the %d layers of --stack %s: give one per layer, outermost first (0 for one per client instance)", len(c.Instances), len(names), strings.Join(names, ","))
	}
	st := &stack{names: names, base: b, opts: opts, shard: sh}
	for k, name := range names {
		l, err := stackLayer(o, name, b.Fleets, c)
		if err != nil {
			return nil, err
		}
		if k < len(c.Instances) {
			l.layer.Instances = c.Instances[k]
		}
		st.files = append(st.files, l)
	}
	return st, nil
}

// stackFile is one layer of a stack as read: the layer, its files and
// the fleet imported from them (for advise to edit).
type stackFile struct {
	layer verdict.StackLayer
	srcs  []importer.Source
	from  importer.Fleet
	// embedded: srcs is a config held in a ConfigMap's data (--manifests),
	// whose edit advise prints and does not write.
	embedded bool
}

// stackLayer imports one layer: its files (joined with "+"), with its own
// format, and picks its policy: the first fleet that retries.
func stackLayer(o IO, name string, baseFleets []scenario.Fleet, c CheckOptions) (stackFile, error) {
	var srcs []importer.Source
	inside := map[string]kube.Embedded{} // configs found in ConfigMaps, by their source's name
	for _, f := range strings.Split(name, "+") {
		data, err := o.read(f, maxConfigSize)
		if err != nil {
			return stackFile{}, err
		}
		src := userconfig.Source(f, data)
		es, isCM, err := kube.ConfigMapConfigs(src.Name, data)
		if err != nil {
			return stackFile{}, err
		}
		if !isCM {
			srcs = append(srcs, src)
			continue
		}
		if len(es) == 0 {
			return stackFile{}, usagef("--stack layer %s: its ConfigMaps hold no config this tool reads (a gRPC service config, an Envoy bootstrap, an AWS config file)", f)
		}
		for _, e := range es {
			inside[e.Src.Name] = e
			srcs = append(srcs, e.Src)
		}
	}
	opts := importer.Options{Protocol: c.Protocol, IstioVersion: c.Istio}
	if c.Format != "" {
		f, err := importer.ParseFormat(c.Format)
		if err != nil {
			return stackFile{}, usagef("--format: %v", err)
		}
		opts.Format = f
	}
	fl, err := importer.Import(srcs, opts)
	if err != nil {
		return stackFile{}, usagef("--stack layer %s: %v", name, err)
	}
	pick := fl[0]
	for _, f := range fl {
		if f.Fleet.Retry.MaxRetries != 0 {
			pick = f
			break
		}
	}
	file := strings.Split(name, "+")[0]
	l := verdict.StackLayer{Name: filepath.Base(file), File: file,
		Input: verdict.CheckInput{Fleet: pick.Fleet, Origin: pick.Origin, FromBase: userconfig.FromBase(pick.From)}}
	for _, s := range importer.Settings(srcs, pick) {
		at := verdict.SettingAt{Name: s.Name, File: s.File, Line: s.Line}
		if e, ok := inside[s.File]; ok {
			// A setting in a ConfigMap's value: its line in the manifest.
			at.File = e.File
			if at.Line > 0 {
				at.Line += e.Offset
			}
		}
		l.Settings = append(l.Settings, at)
	}
	return stackFile{layer: l, srcs: srcs, from: pick}, nil
}

// gated reports whether check writes CI outputs or compares a baseline.
func (c *CheckOptions) gated() bool {
	return c.SARIF != "" || c.JUnit != "" || c.Baseline != ""
}

// importerSettings are an imported fleet's settings with their file and
// line.
func importerSettings(u *userconfig.Files, fl importer.Fleet) []verdict.SettingAt {
	var out []verdict.SettingAt
	for _, s := range importer.Settings(u.Sources, fl) {
		out = append(out, verdict.SettingAt{Name: s.Name, File: s.File, Line: s.Line})
	}
	return out
}
