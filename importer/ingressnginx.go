package importer

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/retrystorm/retrystorm/giveup"
	"github.com/retrystorm/retrystorm/scenario"
)

// The ingress-nginx controller's ConfigMap: its keys that name retries,
// with the controller's defaults (internal/ingress/controller/config/
// config.go, NewDefault), which its template writes as the nginx
// directives of every Ingress's location.
var ingressKeys = []struct {
	key, directive, dflt string
}{
	{"proxy-next-upstream", "proxy_next_upstream", "error timeout"},
	{"proxy-next-upstream-tries", "proxy_next_upstream_tries", "3"},
	{"proxy-next-upstream-timeout", "proxy_next_upstream_timeout", "0"},
	{"proxy-read-timeout", "proxy_read_timeout", "60"},
	{"proxy-connect-timeout", "proxy_connect_timeout", "5"},
}

// isIngressConfigMap reports whether d is a ConfigMap that sets one of
// ingress-nginx's retry keys.
func isIngressConfigMap(d *yaml.Node) bool {
	if str(d, "kind") != "ConfigMap" {
		return false
	}
	data := get(d, "data")
	for _, k := range ingressKeys[:3] {
		if get(data, k.key) != nil {
			return true
		}
	}
	return false
}

// ingressConfigMap reports whether data is a YAML file with such a
// ConfigMap.
func ingressConfigMap(data []byte) bool {
	docs, err := documents("", data)
	if err != nil {
		return false
	}
	for _, d := range docs {
		if isIngressConfigMap(d) {
			return true
		}
	}
	return false
}

// importIngressNginx makes a fleet of each ingress-nginx ConfigMap of s:
// its keys are written as the directives of one location, which the nginx
// importer reads as it reads any, with the controller's defaults for the
// keys it leaves out. The endpoints are not in the ConfigMap: every retry
// the tries allow is imported.
func importIngressNginx(s Source) ([]Fleet, error) {
	docs, err := documents(s.Name, s.Data)
	if err != nil {
		return nil, err
	}
	var out []Fleet
	for _, d := range docs {
		if !isIngressConfigMap(d) {
			continue
		}
		name := str(get(d, "metadata"), "name")
		data := get(d, "data")
		var loc []*ngxDirective
		for _, k := range ingressKeys {
			n := get(data, k.key)
			if n == nil {
				continue // the controller's default, which is nginx's but for the tries (below)
			}
			v, line := n.Value, n.Line
			if k.key == "proxy-read-timeout" || k.key == "proxy-connect-timeout" || k.key == "proxy-next-upstream-timeout" {
				v += "s" // the controller writes these as seconds
			}
			args := strings.Fields(v)
			if len(args) == 0 {
				return nil, fmt.Errorf("%s:%d: data.%s: empty", s.Name, line, k.key)
			}
			loc = append(loc, &ngxDirective{Name: k.directive, Args: args, Line: line})
		}
		l := ngxLocation{file: s.Name, path: "(every Ingress)", line: d.Line, server: "ingress-nginx",
			levels: [][]*ngxDirective{loc}, pass: &ngxDirective{Name: "proxy_pass", Args: []string{"http://upstream_balancer"}, Line: d.Line}}
		f, err := ingressFleet(l, name)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// ingressFleet is the fleet of a ConfigMap's location: nginx's reading of
// its directives, the tries bounded by proxy-next-upstream-tries alone.
func ingressFleet(l ngxLocation, name string) (Fleet, error) {
	p := &prov{file: l.file}
	f := scenario.Fleet{Name: "ingress-nginx " + name, Retry: scenario.Retry{Backoff: noBackoff}}
	f.Product = string(giveup.NGINX)
	p.note("product", "nginx", "the controller runs nginx: 502 after an error, 504 after a timeout")
	if err := ngxTimeouts(p, &f, l, "proxy_"); err != nil {
		return Fleet{}, ingressError(err)
	}
	on, nonIdem, err := ngxNext(p, l, "proxy_")
	if err != nil {
		return Fleet{}, ingressError(err)
	}
	tries := 3
	if d := ngxLast(l.levels[0], "proxy_next_upstream_tries"); d == nil {
		p.dflt("retry.max_retries", "2", "data.proxy-next-upstream-tries", "ingress-nginx's default, 3 tries")
	} else {
		n, err := ngxInt(d.Args[0])
		if err != nil || len(d.Args) != 1 {
			return Fleet{}, fmt.Errorf("%s:%d: data.proxy-next-upstream-tries: %q is not a number", l.file, d.Line, strings.Join(d.Args, " "))
		}
		if n > 0 {
			tries = n
		}
		p.set("retry.max_retries", strconv.Itoa(tries-1), "data.proxy-next-upstream-tries").atLine(d.Line, lineAfter).by(afterComma, "less the first try")
	}
	if len(on) > 0 && tries > 1 {
		f.Retry.MaxRetries = tries - 1
		if len(on) < len(giveup.Kinds) {
			f.Retry.On = on
		}
		f.Retry.IdempotentOnly = !nonIdem
	}
	p.lose("the endpoints: the controller balances over the Service's endpoints (its Lua balancer), which the ConfigMap does not list; every try proxy-next-upstream-tries allows is imported, as if there were as many endpoints")
	f.Budget = scenario.Budget{Use: scenario.BudgetNone}
	p.note("budget", "none", "nginx has no retry budget")
	return Fleet{Fleet: f, Format: NGINX, File: l.file, Origin: fmt.Sprintf("%s: ConfigMap %s (line %d)", l.file, name, l.line), From: p.list, Lost: p.lost}, nil
}

// ingressError names the ConfigMap's key for a directive's error.
func ingressError(err error) error {
	s := err.Error()
	for _, k := range ingressKeys {
		s = strings.Replace(s, ": "+k.directive+":", ": data."+k.key+":", 1)
	}
	return fmt.Errorf("%s", s)
}
