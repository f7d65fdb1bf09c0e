// Package kube finds call chains in Kubernetes manifests: a route into a
// Service (an Istio VirtualService, a Linkerd ServiceProfile, a Gateway
// API HTTPRoute), then the client configs of the pods that serve it (a
// gRPC service config, an Envoy bootstrap or an AWS config file held in a
// ConfigMap they mount), then the Services those pods call, and so on.
// Everything is matched by the names the manifests give explicitly (the
// route's host, the Service's selector, the pods' ConfigMap volumes, URLs
// in their environment); what cannot be matched is listed, never guessed
// (docs/stack.md, "--manifests"). The importer reads each config found.
package kube

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/retrystorm/retrystorm/importer"
	"github.com/retrystorm/retrystorm/internal/safetext"
	"github.com/retrystorm/retrystorm/scenario"
)

// MaxFiles and MaxBytes bound the manifest files Find reads, in number and
// together (each file is bounded by the caller's Read): parsing and
// importing a few MiB of ConfigMaps takes seconds.
const (
	MaxFiles = 5000
	MaxBytes = 64 << 20
)

// Layer is one retry config of a chain: the policy it calls the next
// layer (or the origin) with, and where it is in the manifests.
type Layer struct {
	Name string // "ConfigMap frontend-grpc", "VirtualService shop-edge"
	File string
	Line int // where in File the object is; 0: not known
	// Via says how the layer above leads to this one ("frontend.yaml:24:
	// env PAYMENTS_ADDR"); empty for the first layer.
	Via string
	// Fleet is the policy as the importer read it; Origin names the object
	// it came from (a route the importer read as one fleet with others of
	// the same settings has its own Origin here).
	Fleet  scenario.Fleet
	Origin string
	// From is where each of Fleet's settings came from (importer.Fleet's
	// From).
	From []importer.Provenance
	// Settings are the layer's settings with their file and line.
	Settings []importer.Setting
	// Instances is how many instances the layer has (the replicas of the
	// Deployment that runs it); zero: not known.
	Instances int
	// Format and Sources are what an edit of the layer's policy takes
	// (importer.Edit): its format and the files its fleet was imported
	// from, the mesh's files together. For a config held inside a
	// ConfigMap's data (Embedded), Sources is that document alone, named
	// "FILE#ConfigMap NAME/KEY": an edit of it is of the data, which the
	// manifest holds as a string.
	Format   importer.Format
	Sources  []importer.Source
	Embedded bool
}

// Options say how Find reads the manifests.
type Options struct {
	// Read reads one file (bounded by the caller); required.
	Read func(name string) ([]byte, error)
	// Import is what the importer assumes for settings a config leaves
	// out (the protocol, the Istio version, the timeout of a config that
	// sets none).
	Import importer.Options
}

// Result is what Find found.
type Result struct {
	Files, Workloads, Services, Configs int
	// Chains are the call chains, each outermost first.
	Chains [][]Layer
	// Unmatched says what could not be matched, and why.
	Unmatched []string
}

// Find reads the manifests under dir (.yaml, .yml and .json files; hidden
// directories are skipped) and returns the call chains they name. A file
// that does not parse, a loop of calls, or more files than MaxFiles is an
// error.
func Find(dir string, o Options) (*Result, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if ext := filepath.Ext(p); !d.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("--manifests: %w", err)
	}
	if len(paths) > MaxFiles {
		return nil, fmt.Errorf("--manifests %s: %d files, more than the %d it reads", dir, len(paths), MaxFiles)
	}
	datas := make([][]byte, len(paths))
	total, read := 0, len(paths)
	var readErr error // the first file that cannot be read: its error comes after the earlier files'
	for i, p := range paths {
		data, err := o.Read(p)
		if err == nil {
			if total += len(data); total > MaxBytes {
				err = fmt.Errorf("--manifests %s: more than %d MiB of manifests (at %s): check a part of the directory at a time", dir, MaxBytes>>20, p)
			}
		}
		if err != nil {
			read, readErr = i, err
			break
		}
		datas[i] = data
	}
	// Each file is parsed on its own, side by side; what they add up to is
	// put together in their order, the first error by file first.
	files := make([]fileObjects, read)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), read) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < read; i = int(next.Add(1) - 1) {
				files[i] = readObjects(paths[i], datas[i], o.Import)
			}
		})
	}
	wg.Wait()
	var (
		loads    []workload
		services []service
		layers   []manifestLayer
		routeSrc []importer.Source
		ix       = &kubeIndex{}
	)
	for i, f := range files {
		if f.err != nil {
			return nil, f.err
		}
		loads, services = append(loads, f.loads...), append(services, f.services...)
		ix.indexDocs(paths[i], f.docs)
		layers = append(layers, f.configs...)
		if f.routes {
			// Named as every message will quote it: escaped, as check's
			// files are.
			routeSrc = append(routeSrc, importer.Source{Name: safetext.Escape(paths[i]), Data: datas[i]})
		}
		files[i], datas[i] = fileObjects{}, nil // indexed: no longer kept
	}
	if readErr != nil {
		return nil, readErr
	}
	routes, err := routeLayers(routeSrc, ix, o.Import)
	if err != nil {
		return nil, err
	}
	layers = append(layers, routes...)
	chains, unmatched, err := buildChains(layers, loads, services, ix)
	if err != nil {
		return nil, err
	}
	return &Result{Files: len(paths), Workloads: len(loads), Services: len(services), Configs: len(layers), Chains: chains, Unmatched: unmatched}, nil
}

// fileObjects is what one manifest file holds, as Find reads it.
type fileObjects struct {
	loads    []workload
	services []service
	docs     []docHead       // for the index
	configs  []manifestLayer // its ConfigMaps' client configs
	routes   bool            // it holds mesh routes (Istio, Linkerd)
	err      error
}

// readObjects reads manifest file p: its errors in the order Find meets
// them (its objects, its documents, its ConfigMaps' configs).
func readObjects(p string, data []byte, opts importer.Options) fileObjects {
	var f fileObjects
	if f.loads, f.services, f.err = kubeObjects(p, data); f.err != nil {
		return f
	}
	docs, err := decodeDocs(p, data)
	if f.err = err; err != nil {
		return f
	}
	f.docs = headsOf(docs)
	if f.configs, f.err = configMapLayers(p, data, opts); f.err != nil {
		return f
	}
	if k, err := importer.Detect(p, data); err == nil && (k == importer.Istio || k == importer.Linkerd) {
		f.routes = true
	}
	return f
}

// configMapLayers are the client configs held in the ConfigMaps of one
// manifest file, as layers.
func configMapLayers(p string, data []byte, opts importer.Options) ([]manifestLayer, error) {
	es, _, err := ConfigMapConfigs(p, data)
	if err != nil {
		return nil, err
	}
	var layers []manifestLayer
	for _, e := range es {
		fl, err := importer.Import([]importer.Source{e.Src}, opts)
		if err != nil {
			return nil, err
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(e.Src.Name, p+"#ConfigMap "), "/")
		cmNS := namespaceOf(data, name)
		for _, f := range fl {
			l := manifestLayer{cm: cmNS + "/" + name, ns: cmNS, layer: Layer{Name: "ConfigMap " + name, File: p, Line: e.Offset + 1,
				Fleet: f.Fleet, Origin: f.Origin, From: f.From, Format: f.Format, Sources: []importer.Source{e.Src}, Embedded: true}}
			for _, s := range importer.Settings([]importer.Source{e.Src}, f) {
				at := importer.Setting{Name: s.Name, File: p, Line: s.Line}
				if s.Line > 0 {
					at.Line += e.Offset
				}
				if s.File == "" {
					at.File = ""
				}
				l.layer.Settings = append(l.layer.Settings, at)
			}
			layers = append(layers, l)
		}
	}
	return layers, nil
}

// routeLayers are the routes of the mesh's files, imported together so
// that a DestinationRule's budget joins its VirtualService across files.
// A fleet stands for the routes with the same settings (Covers): each
// routes into its own host, and is a layer of its own.
func routeLayers(srcs []importer.Source, ix *kubeIndex, opts importer.Options) ([]manifestLayer, error) {
	if len(srcs) == 0 {
		return nil, nil
	}
	fl, err := importer.Import(srcs, opts)
	if err != nil {
		return nil, err
	}
	var layers []manifestLayer
	for _, f := range fl {
		origins := append([]string{f.Origin}, f.Covers...)
		sets := append([][]importer.Setting{importer.Settings(srcs, f)}, importer.CoveredSettings(srcs, f)...)
		for k, origin := range origins {
			file, rest, _ := strings.Cut(origin, ": ")
			obj, _, _ := strings.Cut(rest, ": ")
			l := manifestLayer{host: shortHost(routeHost(origin)), layer: Layer{Name: obj, File: file,
				Fleet: f.Fleet, Origin: origin, From: f.From, Format: f.Format, Sources: srcs}}
			ix.describe(&l, file, obj, origin)
			l.layer.Settings = append(l.layer.Settings, sets[k]...)
			layers = append(layers, l)
		}
	}
	return layers, nil
}
