package configcmd

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/experiment"
	"github.com/retrystorm/retrystorm/importer"
	"go.yaml.in/yaml/v3"
)

// maxManifests bounds the files --manifests reads.
const maxManifests = 5000

// workload is a Deployment or StatefulSet: the instances of a service,
// and the ConfigMaps its pods mount (where its client configs are).
type workload struct {
	kind, name, ns, file string
	line, replicas       int
	labels               map[string]string
	configMaps           []string
	// targets are the Services its containers name in env values, args
	// and command (hops.go).
	targets []ref
}

// service is a Kubernetes Service: the name routes call, and the pods it
// selects.
type service struct {
	name, ns string
	selector map[string]string
}

// manifestLayer is a config found in the manifests: a route into a host
// (a VirtualService, a ServiceProfile, an HTTPRoute), or a client config
// in a ConfigMap.
type manifestLayer struct {
	layer experiment.StackLayer
	host  string // routes: the short name of the host they route calls into
	cm    string // client configs: "namespace/name" of their ConfigMap
	ns    string
	// Routes: the Services whose callers they apply to, whether they
	// apply to the mesh's own calls (a sidecar's) or at a gateway only,
	// and the Services they send to (hops.go).
	into  []string
	mesh  bool
	dests []ref
}

// RunManifests checks the call chains found in the Kubernetes manifests
// under c.Manifests (docs/stack.md): a route into a service, then the
// client configs of the pods that serve it, matched by explicit names
// only (the route's host, the Service's selector, the pods' ConfigMap
// volumes). What cannot be matched is listed, not guessed.
func RunManifests(ctx context.Context, files []string, c CheckOptions, o IO) error {
	if len(files) > 0 || len(c.Stack) > 0 {
		return usagef("check --manifests %s takes no files and no --stack: it finds the chains in the directory", c.Manifests)
	}
	opts, sh, err := c.options(o)
	if err != nil {
		return err
	}
	b, err := base(o, c.Base)
	if err != nil {
		return err
	}
	if c.Seed != nil {
		b.Seed = *c.Seed
	}
	var paths []string
	err = filepath.WalkDir(c.Manifests, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != c.Manifests && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if ext := filepath.Ext(p); !d.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return usagef("--manifests: %v", err)
	}
	if len(paths) > maxManifests {
		return usagef("--manifests %s: %d files, more than the %d it reads", c.Manifests, len(paths), maxManifests)
	}
	var (
		loads    []workload
		services []service
		layers   []manifestLayer
		routeSrc []importer.Source
		ix       = &kubeIndex{}
	)
	var timeout time.Duration // for configs that set none (the AWS SDKs'): the base's
	if len(b.Fleets) > 0 {
		timeout = b.Fleets[0].Timeout
	}
	for _, p := range paths {
		data, err := o.read(p, maxConfigSize)
		if err != nil {
			return err
		}
		ws, ss, err := kubeObjects(p, data)
		if err != nil {
			return err
		}
		loads, services = append(loads, ws...), append(services, ss...)
		if err := ix.indexObjects(p, data); err != nil {
			return err
		}
		es, _, err := configMapSources(p, data)
		if err != nil {
			return err
		}
		for _, e := range es {
			fl, err := importer.Import([]importer.Source{e.src}, importer.Options{Protocol: c.Protocol, IstioVersion: c.Istio, Timeout: timeout})
			if err != nil {
				return usagef("%v", err)
			}
			name, _, _ := strings.Cut(strings.TrimPrefix(e.src.Name, p+"#ConfigMap "), "/")
			cmNS := namespaceOf(data, name)
			for _, f := range fl {
				l := manifestLayer{cm: cmNS + "/" + name, ns: cmNS, layer: experiment.StackLayer{Name: "ConfigMap " + name, File: p, Line: e.offset + 1,
					Input: experiment.CheckInput{Fleet: f.Fleet, Origin: f.Origin, FromBase: fromBase(f.From)}}}
				for _, s := range importer.Settings([]importer.Source{e.src}, f) {
					at := experiment.SettingAt{Name: s.Name, File: p, Line: s.Line}
					if s.Line > 0 {
						at.Line += e.offset
					}
					if s.File == "" {
						at.File = ""
					}
					l.layer.Settings = append(l.layer.Settings, at)
				}
				layers = append(layers, l)
			}
		}
		if f, err := importer.Detect(p, data); err == nil && (f == importer.Istio || f == importer.Linkerd) {
			routeSrc = append(routeSrc, source(p, data))
		}
	}
	if len(routeSrc) > 0 {
		// Together: a DestinationRule's budget joins its VirtualService
		// across files.
		fl, err := importer.Import(routeSrc, importer.Options{Protocol: c.Protocol, IstioVersion: c.Istio, Timeout: timeout})
		if err != nil {
			return usagef("%v", err)
		}
		for _, f := range fl {
			// A fleet stands for the routes with the same settings
			// (Covers): each routes into its own host.
			origins := append([]string{f.Origin}, f.Covers...)
			sets := append([][]importer.Setting{importer.Settings(routeSrc, f)}, importer.CoveredSettings(routeSrc, f)...)
			for k, origin := range origins {
				file, rest, _ := strings.Cut(origin, ": ")
				obj, _, _ := strings.Cut(rest, ": ")
				l := manifestLayer{host: shortHost(routeHost(origin)), layer: experiment.StackLayer{Name: obj, File: file,
					Input: experiment.CheckInput{Fleet: f.Fleet, Origin: origin, FromBase: fromBase(f.From)}}}
				ix.describe(&l, file, obj, origin)
				for _, s := range sets[k] {
					l.layer.Settings = append(l.layer.Settings, experiment.SettingAt{Name: s.Name, File: s.File, Line: s.Line})
				}
				layers = append(layers, l)
			}
		}
	}
	chains, unmatched, err := buildChains(layers, loads, services, ix)
	if err != nil {
		return err
	}
	head := o.Stdout
	if c.JSON {
		head = o.Stderr // the JSON has them too
	}
	fmt.Fprintf(head, "Manifests under %s: %d files, %d workloads, %d services, %d retry configs; %d chains found.\n", c.Manifests, len(paths), len(loads), len(services), len(layers), len(chains))
	for _, u := range unmatched {
		fmt.Fprintf(head, "  not matched: %s\n", u)
	}
	co := experiment.CheckOptions{Base: b, Load: c.Load, Dip: c.Dip, Seeds: c.Seeds, Clients: c.Clients}
	return c.runChains(ctx, o, chainSet{source: "--manifests " + c.Manifests, chains: chains, unmatched: unmatched}, co, opts, sh)
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
func blameWhys(bs []experiment.Blame) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Why)
	}
	return out
}

// chainKey is what makes two chains the same to simulate: each layer's
// policy and instances.
func chainKey(ch []experiment.StackLayer) string {
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

func selects(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// routeHost is the host an imported route names in its Origin ("...
// (host orders.shop.svc.cluster.local)").
func routeHost(origin string) string {
	_, h, ok := strings.Cut(origin, "(host ")
	if !ok {
		// Linkerd's annotations on a Service: calls into it.
		if _, rest, ok := strings.Cut(origin, ": Service "); ok {
			h, _, _ = strings.Cut(rest, " ")
			return h
		}
		// A ServiceProfile is named by its host.
		if _, rest, ok := strings.Cut(origin, "ServiceProfile "); ok {
			h, _, _ = strings.Cut(rest, ":")
			return h
		}
		return ""
	}
	h, _, _ = strings.Cut(h, ")")
	return h
}

// shortHost is a host's Service name: its first DNS label.
func shortHost(h string) string {
	s, _, _ := strings.Cut(h, ".")
	return s
}

// namespaceOf is the namespace of the ConfigMap called name in data
// ("default" when it says none).
func namespaceOf(data []byte, name string) string {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			return "default"
		}
		if len(doc.Content) == 0 {
			continue
		}
		root := doc.Content[0]
		md := field(root, "metadata")
		if k := field(root, "kind"); k != nil && k.Value == "ConfigMap" && field(md, "name") != nil && field(md, "name").Value == name {
			if ns := field(md, "namespace"); ns != nil && ns.Value != "" {
				return ns.Value
			}
			return "default"
		}
	}
}

// kubeObjects reads the workloads and Services of a manifest file. A file
// that does not parse is an error naming it and the line.
func kubeObjects(name string, data []byte) ([]workload, []service, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var ws []workload
	var ss []service
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, usagef("%s: %v", name, strings.TrimPrefix(err.Error(), "yaml: "))
		}
		if len(doc.Content) == 0 {
			continue
		}
		var obj struct {
			Kind     string
			Metadata struct{ Name, Namespace string }
			Spec     struct {
				Replicas *int
				Selector map[string]any
				Template struct {
					Metadata struct{ Labels map[string]string }
					Spec     struct {
						Volumes []struct {
							ConfigMap *struct{ Name string } `yaml:"configMap"`
						}
						Containers []struct {
							EnvFrom []struct {
								ConfigMapRef *struct{ Name string } `yaml:"configMapRef"`
							} `yaml:"envFrom"`
						}
					}
				}
			}
		}
		root := doc.Content[0]
		k := field(root, "kind")
		if k == nil || !slices.Contains([]string{"Deployment", "StatefulSet", "Service"}, k.Value) {
			continue
		}
		if err := root.Decode(&obj); err != nil {
			return nil, nil, usagef("%s:%d: %s: %v", name, root.Line, k.Value, strings.TrimPrefix(err.Error(), "yaml: "))
		}
		ns := cmp.Or(obj.Metadata.Namespace, "default")
		if obj.Kind == "Service" {
			sel := map[string]string{}
			for k, v := range obj.Spec.Selector {
				if s, ok := v.(string); ok {
					sel[k] = s
				}
			}
			ss = append(ss, service{name: obj.Metadata.Name, ns: ns, selector: sel})
			continue
		}
		w := workload{kind: obj.Kind, name: obj.Metadata.Name, ns: ns, file: name, line: root.Line, replicas: 1, labels: obj.Spec.Template.Metadata.Labels}
		if obj.Spec.Replicas != nil {
			if *obj.Spec.Replicas < 0 {
				return nil, nil, usagef("%s:%d: %s %s: spec.replicas %d: want 0 or more", name, root.Line, obj.Kind, obj.Metadata.Name, *obj.Spec.Replicas)
			}
			w.replicas = max(*obj.Spec.Replicas, 1)
		}
		for _, v := range obj.Spec.Template.Spec.Volumes {
			if v.ConfigMap != nil {
				w.configMaps = append(w.configMaps, ns+"/"+v.ConfigMap.Name)
			}
		}
		w.targets = podTargets(name, field(field(field(root, "spec"), "template"), "spec"), ns)
		for _, c := range obj.Spec.Template.Spec.Containers {
			for _, e := range c.EnvFrom {
				if e.ConfigMapRef != nil {
					w.configMaps = append(w.configMaps, ns+"/"+e.ConfigMapRef.Name)
				}
			}
		}
		ws = append(ws, w)
	}
	return ws, ss, nil
}
