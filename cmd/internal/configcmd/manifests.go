package configcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/importer/kube"
	"github.com/retrystorm/retrystorm/userconfig"
	"github.com/retrystorm/retrystorm/verdict"
)

// RunManifests checks the call chains found in the Kubernetes manifests
// under c.Manifests (docs/stack.md): package kube finds them, each layer
// matched by explicit names only; what cannot be matched is listed, not
// guessed.
func RunManifests(ctx context.Context, files []string, c CheckOptions, o IO) error {
	if len(files) > 0 || len(c.Stack) > 0 {
		return usagef("check --manifests %s takes no files and no --stack: it finds the chains in the directory", c.Manifests)
	}
	if c.EmitWorst != "" {
		return usagef("--emit-worst writes one fleet's or one chain's worst cell, and --manifests checks many chains: check the chain with --stack and --emit-worst")
	}
	opts, sh, err := c.options(o)
	if err != nil {
		return err
	}
	b, err := o.reader().Base(c.Base)
	if err != nil {
		return err
	}
	if c.Seed != nil {
		b.Seed = *c.Seed
	}
	assume := importer.Options{Protocol: c.Protocol, IstioVersion: c.Istio}
	found, err := kube.Find(c.Manifests, kube.Options{Read: func(name string) ([]byte, error) { return o.read(name, maxConfigSize) }, Import: assume})
	if err != nil {
		return usagef("%v", err)
	}
	var chains [][]verdict.StackLayer
	for _, ch := range found.Chains {
		chains = append(chains, stackLayers(ch))
	}
	head := o.Stdout
	if c.JSON {
		head = o.Stderr // the JSON has them too
	}
	fmt.Fprintf(head, "Manifests under %s: %d files, %d workloads, %d services, %d retry configs; %d chains found.\n", c.Manifests, found.Files, found.Workloads, found.Services, found.Configs, len(chains))
	for _, u := range found.Unmatched {
		fmt.Fprintf(head, "  not matched: %s\n", u)
	}
	co := verdict.CheckOptions{Base: b, Load: c.Load, Dip: c.Dip, Seeds: c.Seeds, Clients: c.Clients, FullRuns: c.FullRuns}
	return c.runChains(ctx, o, chainSet{source: "--manifests " + c.Manifests, chains: chains, unmatched: found.Unmatched}, co, opts, sh)
}

// stackLayers are a chain found in the manifests as the verdict engine
// takes a stack.
func stackLayers(ch []kube.Layer) []verdict.StackLayer {
	var out []verdict.StackLayer
	for _, l := range ch {
		sl := verdict.StackLayer{Name: l.Name, File: l.File, Line: l.Line, Via: l.Via, Instances: l.Instances,
			Input: verdict.CheckInput{Fleet: l.Fleet, Origin: l.Origin, FromBase: userconfig.FromBase(l.From)}}
		for _, s := range l.Settings {
			sl.Settings = append(sl.Settings, verdict.SettingAt{Name: s.Name, File: s.File, Line: s.Line})
		}
		out = append(out, sl)
	}
	return out
}

func fileLine(file string, line int) string {
	if line > 0 {
		return fmt.Sprintf("%s:%d", file, line)
	}
	return file
}

func instances(n int) string {
	if n == 0 {
		return "one instance per client (--clients)"
	}
	return fmt.Sprintf("%d instances (replicas)", n)
}

// blameWhys are the reasons of a layer's blame, to blame them again at
// another chain's files.
func blameWhys(bs []verdict.Blame) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Why)
	}
	return out
}

// chainKey is what makes two chains the same to simulate: each layer's
// policy and instances.
func chainKey(ch []verdict.StackLayer) string {
	var b bytes.Buffer
	for _, l := range ch {
		j, _ := json.Marshal(struct {
			F any
			N int
			B []string
		}{l.Input.Fleet, l.Instances, l.Input.FromBase})
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}
