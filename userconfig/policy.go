package userconfig

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/scenario"
)

// Policy is the retry policy of the user's own config, for calibrate and
// replay --config: the one fleet their metrics are compared with and
// written with, read as check and advise read their files.
type Policy struct {
	// Fleet is the fleet with its provenance: each setting's file and
	// path (importer.Settings finds their lines).
	Fleet importer.Fleet
	// Sources are the files it was read from, as the provenance names
	// them.
	Sources []importer.Source
}

// Policy reads files (Envoy, Istio, Linkerd, gRPC service configs,
// AWS SDK settings, or scenario files) through the same path as check and
// advise (Files: the importers, or the scenario loader), and returns
// the one fleet route names, found as advise's --route finds it. Several
// fleets and no route is a usage error that lists them: a window of
// metrics is one service's, and calibrate must not guess which route of a
// config it saw. Every error is a usage error naming the file (and the
// line, for YAML).
func (o Reader) Policy(files []string, route string, assume importer.Options) (*Policy, error) {
	if len(files) == 0 {
		return nil, usagef("--config needs a file")
	}
	in, _, _, u, err := o.Files(files, "", "", assume)
	if ue, ok := errors.AsType[*Error](err); ok {
		// calibrate and replay have no --format: the importer's advice to
		// name one is check's.
		return nil, usagef("%s", strings.Replace(ue.Msg, "; name the format with --format if it is one", "", 1))
	}
	if err != nil {
		return nil, err
	}
	if len(in) == 0 {
		return nil, usagef("--config %s: no fleet with a retry policy", strings.Join(files, ", "))
	}
	if len(in) > 1 && route == "" {
		var names []string
		for _, f := range in {
			names = append(names, fmt.Sprintf("%q (%s)", f.Fleet.Name, f.Origin))
		}
		return nil, usagef("--config %s: %d fleets, one per route or method with its own settings: %s; name the one the metrics are from with --route NAME",
			strings.Join(files, ", "), len(in), strings.Join(names, ", "))
	}
	pick, err := Pick(in, route)
	if err != nil {
		return nil, err
	}
	if f, ok := u.Imported(pick); ok {
		return &Policy{Fleet: f, Sources: u.Sources}, nil
	}
	// A fleet of a scenario file: its settings are the file's own, each
	// at its key under fleets[i].
	data, err := o.Read(pick.Origin, MaxConfigSize)
	if err != nil {
		return nil, err
	}
	return scenarioPolicy(pick.Origin, data, pick.Fleet)
}

// scenarioPolicy is a scenario file's fleet f as a Policy: the provenance
// of each key the file sets for it, and "the scenario's default" for the
// keys it leaves out.
func scenarioPolicy(file string, data []byte, f scenario.Fleet) (*Policy, error) {
	sc, err := scenario.Parse(file, data)
	if err != nil {
		return nil, usagef("%v", err)
	}
	i := slices.IndexFunc(sc.Fleets, func(g scenario.Fleet) bool { return g.Name == f.Name })
	if i < 0 {
		return nil, fmt.Errorf("configcmd: fleet %q is not in %s (a bug)", f.Name, file)
	}
	src := Source(file, data)
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, usagef("%s: %v", src.Name, err)
	}
	if len(sc.Tiers) > 0 {
		// The metrics are one layer's: the file calibrate writes has the
		// fleet and the origin, no tiers, and a fleet without its tiers
		// is not the config's whole.
		var tiers []string
		for _, t := range sc.Tiers {
			tiers = append(tiers, fmt.Sprintf("%q (max_retries %d)", t.Name, t.Client.Retry.MaxRetries))
		}
		return nil, usagef("%s:%d: tiers %s: --config takes one layer's retry policy, the fleet's calling the origin (the layer the metrics count), and a scenario's tiers retry on their own, which the file written would drop; give a scenario file without tiers (the fleet alone)",
			src.Name, topKeyLine(&doc, "tiers"), strings.Join(tiers, ", "))
	}
	fl := importer.Fleet{Fleet: sc.Fleets[i], Format: importer.ScenarioFleet, File: src.Name, Origin: fmt.Sprintf("%s: fleets[%d] (%s)", src.Name, i, strconv.Quote(f.Name))}
	if node := fleetNode(&doc, i); node != nil {
		for k := 0; k+1 < len(node.Content); k += 2 {
			key := node.Content[k].Value
			if key == "name" {
				continue
			}
			fl.From = append(fl.From, importer.Provenance{Settings: []string{key}, Value: importer.AsWritten, File: src.Name, Path: fmt.Sprintf("fleets[%d].%s", i, key)})
		}
	}
	return &Policy{Fleet: fl, Sources: []importer.Source{src}}, nil
}

// topKeyLine is the line of a top-level key of a YAML document (0 when
// it is not there).
func topKeyLine(doc *yaml.Node, key string) int {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return 0
	}
	top := doc.Content[0]
	for k := 0; k+1 < len(top.Content); k += 2 {
		if top.Content[k].Value == key {
			return top.Content[k].Line
		}
	}
	return 0
}

// fleetNode is the mapping of fleets[i] in a scenario file's document.
func fleetNode(doc *yaml.Node, i int) *yaml.Node {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return nil
	}
	for k := 0; k+1 < len(top.Content); k += 2 {
		if top.Content[k].Value == "fleets" {
			l := top.Content[k+1]
			if l.Kind == yaml.SequenceNode && i < len(l.Content) && l.Content[i].Kind == yaml.MappingNode {
				return l.Content[i]
			}
		}
	}
	return nil
}
