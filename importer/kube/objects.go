package kube

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

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
	layer Layer
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

func fileLine(file string, line int) string {
	if line > 0 {
		return fmt.Sprintf("%s:%d", file, line)
	}
	return file
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
			return nil, nil, fmt.Errorf("%s: %v", name, strings.TrimPrefix(err.Error(), "yaml: "))
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
			return nil, nil, fmt.Errorf("%s:%d: %s: %v", name, root.Line, k.Value, strings.TrimPrefix(err.Error(), "yaml: "))
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
				return nil, nil, fmt.Errorf("%s:%d: %s %s: spec.replicas %d: want 0 or more", name, root.Line, obj.Kind, obj.Metadata.Name, *obj.Spec.Replicas)
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
