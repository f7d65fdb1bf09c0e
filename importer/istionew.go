package importer

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/retrystorm/retrystorm/scenario"
)

// istioNoRetries makes an Istio retries block that now says attempts: 0
// one Istio accepts: validateHTTPRetry refuses perTryTimeout, retryOn and
// retryRemoteLocalities beside attempts 0 (validateistio.go), so they go.
// Each request then has the route's timeout alone.
func istioNoRetries(f *yamlFile, retries *yaml.Node) []string {
	var there []string
	for _, k := range []string{"perTryTimeout", "retryOn", "retryRemoteLocalities"} {
		if child(retries, k) != nil {
			there = append(there, k)
		}
	}
	if len(there) == 0 {
		return nil
	}
	if err := f.remove(retries, there...); err != nil {
		return []string{fmt.Sprintf("no retries: remove %s from the retries block by hand (Istio refuses them beside attempts: 0): %v", strings.Join(there, ", "), err)}
	}
	return []string{fmt.Sprintf("no retries: %s removed, which Istio refuses beside attempts: 0; each request has the route's timeout alone", strings.Join(there, " and "))}
}

// defaultRoute reports whether an Istio fleet is a DestinationRule's host
// that no VirtualService routes (Istio's default route and retries).
func defaultRoute(origin string) bool {
	return strings.HasSuffix(origin, ", no VirtualService)")
}

// newFileName is a name for a file to add beside the user's file near,
// called base, that no source has.
func newFileName(srcs []Source, near, base string) string {
	dir := path.Dir(strings.ReplaceAll(near, `\`, "/"))
	ext := path.Ext(base)
	stem := strings.TrimSuffix(base, ext)
	for i := 1; ; i++ {
		name := path.Join(dir, base)
		if i > 1 {
			name = path.Join(dir, fmt.Sprintf("%s-%d%s", stem, i, ext))
		}
		if !slices.ContainsFunc(srcs, func(s Source) bool { return s.Name == name }) {
			return name
		}
	}
}

// newVirtualService writes a VirtualService for the host of
// DestinationRule dr, with one HTTP route to it carrying retries: the
// document to add where a host has none and so takes Istio's default
// retries. It is what Istio's default route does, with the retries said.
func newVirtualService(dr *yaml.Node, retries []kv) []byte {
	meta := get(dr, "metadata")
	name, ns, host := str(meta, "name"), str(meta, "namespace"), str(get(dr, "spec"), "host")
	api := cmpOr(str(dr, "apiVersion"), "networking.istio.io/v1")
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by retrystorm advise: host %s had no VirtualService, so Istio gave its\n", host)
	fmt.Fprintf(&b, "# traffic its default route and retries. Apply this beside DestinationRule %s\n", name)
	b.WriteString("# (the same namespace); it routes the host as the default route does, with these retries.\n")
	fmt.Fprintf(&b, "apiVersion: %s\nkind: VirtualService\nmetadata:\n  name: %s\n", api, yamlScalar(name))
	if ns != "" {
		fmt.Fprintf(&b, "  namespace: %s\n", yamlScalar(ns))
	}
	fmt.Fprintf(&b, "spec:\n  hosts:\n  - %s\n  http:\n  - route:\n    - destination:\n        host: %s\n    retries:\n", yamlScalar(host), yamlScalar(host))
	(&yamlFile{}).writeBlock(&b, retries, 6)
	return []byte(b.String())
}

// yamlScalar writes s as a YAML scalar, quoted when it would not read
// back as the same string.
func yamlScalar(s string) string {
	var v string
	if err := yaml.Unmarshal([]byte(s), &v); err == nil && v == s && !strings.ContainsAny(s, ":#{}[],&*!|>'\"%@`\n") {
		return s
	}
	return strconv.Quote(s)
}

// istioRetriesKV is the retries block of an Istio route that retries n
// times with per-try timeout perTry (0: not set) and retryOn (""; Istio's
// default), backoff base (0: Istio's default).
func istioRetriesKV(n int, perTry, backoff time.Duration, retryOn string) []kv {
	kvs := []kv{{Key: "attempts", Value: strconv.Itoa(n)}}
	if n == 0 {
		return kvs // Istio refuses anything else beside attempts 0
	}
	if perTry > 0 {
		kvs = append(kvs, kv{Key: "perTryTimeout", Value: fmtDur(perTry), Quoted: true})
	}
	if backoff > 0 {
		kvs = append(kvs, kv{Key: "backoff", Value: fmtDur(backoff), Quoted: true})
	}
	if retryOn != "" {
		kvs = append(kvs, kv{Key: "retryOn", Value: retryOn, Quoted: true})
	}
	return kvs
}

// editIstioDefault writes the retries rec says for a host that no
// VirtualService routes: a new VirtualService document beside its
// DestinationRule, and the DestinationRule's budget in place.
func editIstioDefault(open func(string) (*yamlFile, error), srcs []Source, loc location, user, rec scenario.Fleet) ([]Edited, []string, error) {
	_, name, _ := strings.Cut(loc.object, " ")
	df, dr, _ := findDoc(open, srcs, istioKind("DestinationRule", name))
	if dr == nil {
		return nil, nil, fmt.Errorf("%s: %s is not there", loc.file, loc.object)
	}
	n, unlimited := retries(rec)
	var notes []string
	if unlimited {
		n = 10
		notes = append(notes, "unlimited retries: Istio needs attempts; written as 10")
	}
	var perTry, backoff time.Duration
	if rec.Timeout != user.Timeout && rec.Timeout < maxTimeout {
		perTry = rec.Timeout
	}
	if b := rec.Retry.Backoff.Base; b > 0 && b != istioBackoff {
		backoff = b
	}
	retryOn := ""
	if !slices.Equal(user.Retry.On, rec.Retry.On) {
		on, codes := envoyRetryOn(rec)
		for _, c := range codes {
			on += "," + strconv.Itoa(int(c))
		}
		retryOn = strings.ReplaceAll(on, "retriable-status-codes,", "")
	}
	text := newVirtualService(dr, istioRetriesKV(n, perTry, backoff, retryOn))
	file := newFileName(srcs, df.name, "virtualservice-"+fileSafe(name)+".yaml")
	notes = append(notes, fmt.Sprintf("a new file, %s: host %s had no VirtualService; apply it beside DestinationRule %s (in its namespace). A VirtualService of that name already in the cluster would be replaced", file, loc.host, name))
	more, err := istioBudget(open, srcs, loc, user, rec, n)
	if err != nil {
		return nil, nil, err
	}
	notes = append(notes, more...)
	notes = append(notes, breakerLost(rec, "Istio")...)
	return []Edited{{Name: file, After: text, Diff: Diff(file, nil, text)}}, notes, nil
}
