// Package importer reads the retry settings people already run (Envoy,
// Istio, Linkerd, gRPC service configs, the AWS SDKs, nginx, HAProxy) and
// turns each into
// a scenario fleet that behaves as that config does, with a note of where
// each setting came from and what could not be represented.
//
// Each format is read with its project's own definitions where they are Go
// packages that stand alone (Envoy's go-control-plane protobufs, Istio's
// istio.io/api), so field names and defaults are theirs; a setting the
// config leaves out takes the default its project documents, and the note
// says so. docs/import.md documents every mapping and cites every default.
//
// The package is heavy (Envoy's and Istio's generated code): the light
// demo binary must not link it.
package importer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/retrystorm/retrystorm/scenario"
	"go.yaml.in/yaml/v3"
)

// Format names a config format.
type Format string

// The formats the importer reads.
const (
	Envoy   Format = "envoy"
	Istio   Format = "istio"
	Linkerd Format = "linkerd"
	GRPC    Format = "grpc"
	AWS     Format = "aws"
	NGINX   Format = "nginx"
	HAProxy Format = "haproxy"
)

// Formats lists every format, in the order they are documented.
var Formats = []Format{Envoy, Istio, Linkerd, GRPC, AWS, NGINX, HAProxy}

// ParseFormat returns the format called s.
func ParseFormat(s string) (Format, error) {
	f := Format(strings.ToLower(strings.TrimSpace(s)))
	if slices.Contains(Formats, f) {
		return f, nil
	}
	return "", fmt.Errorf("unknown format %q: want one of envoy, istio, linkerd, grpc, aws, nginx or haproxy", s)
}

// Source is one config file.
type Source struct {
	Name string // as the user named it: notes and errors cite it
	Data []byte
}

// Fleet is one imported fleet, with its provenance.
type Fleet struct {
	// Fleet is the scenario fleet: Timeout, Retry, Budget and Breaker as
	// the config sets them.
	Fleet scenario.Fleet
	// Format is where it came from.
	Format Format
	// File is the file the config object is in: the first part of Origin.
	File string
	// Origin names the config object: "envoy.yaml: route api → cluster backend".
	Origin string
	// From says, for each setting, where it came from (file, object,
	// path and line), or which documented default or product rule set it.
	From []Provenance
	// Lost says what the config sets that the fleet cannot represent.
	Lost []string
	// Covers names the other config objects with the same settings (and
	// the same losses), by their Origin: N identical routes are one fleet
	// to simulate, written once.
	Covers []string
	// Replicas is how many replicas the config gives the service the
	// fleet calls (an Envoy cluster's endpoints, an nginx upstream's
	// servers, an HAProxy backend's servers), or 0 when it does not say.
	// Scenario gives a base origin of one replica this many.
	Replicas int

	// at is where the config object is, and coversAt where each of
	// Covers is: the settings read under one are read under the others
	// at the same paths (CoveredSettings).
	at       place
	coversAt []place
}

// Options says how to import.
type Options struct {
	// Format forces a format; "" detects it from each file's content.
	Format Format
	// Timeout is the attempt timeout for formats whose config cannot set
	// one (the AWS SDKs'), when the caller knows it (import --timeout);
	// zero takes the product's own default (for the AWS SDKs, none: an
	// attempt ends only at its caller's deadline).
	Timeout time.Duration
	// Protocol is what the imported services speak, "http" or "grpc",
	// where the config does not say (an Envoy route that matches gRPC, an
	// Istio host whose Service names its port grpc-): Envoy's gRPC retry
	// conditions act only on gRPC answers. "" takes it from the config, or
	// HTTP, and the note says which was assumed.
	Protocol string
	// IstioVersion is the Istio release whose defaults apply, as "1.23";
	// "" is the current release. Before 1.24, Istio's default retries
	// also retried 503 answers.
	IstioVersion string
}

// The protocols of Options.Protocol.
const (
	ProtocolHTTP = "http"
	ProtocolGRPC = "grpc"
)

// check refuses options a user got wrong.
func (o Options) check() error {
	switch o.Protocol {
	case "", ProtocolHTTP, ProtocolGRPC:
	default:
		return fmt.Errorf("importer: protocol %q: want http or grpc", o.Protocol)
	}
	if o.IstioVersion != "" {
		if _, _, err := istioRelease(o.IstioVersion); err != nil {
			return err
		}
	}
	return nil
}

// Import reads every source and returns its fleets, in order. Fleets that
// span files (an Envoy route in one file and its cluster in another) are
// joined across all the sources of the same format.
func Import(srcs []Source, o Options) ([]Fleet, error) {
	if len(srcs) == 0 {
		return nil, errors.New("importer: no files to import")
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	byFormat := map[Format][]Source{}
	var order []Format
	for _, s := range srcs {
		f := o.Format
		if f == "" {
			var err error
			if f, err = Detect(s.Name, s.Data); err != nil {
				return nil, err
			}
		}
		if _, ok := byFormat[f]; !ok {
			order = append(order, f)
		}
		byFormat[f] = append(byFormat[f], s)
	}
	var out []Fleet
	for _, f := range order {
		var fl []Fleet
		var err error
		switch f {
		case Envoy:
			fl, err = importEnvoy(byFormat[f], o)
		case Istio:
			fl, err = importIstio(byFormat[f], o)
		case Linkerd:
			fl, err = importLinkerd(byFormat[f])
		case AWS:
			fl, err = importAWS(byFormat[f], o)
		case GRPC:
			fl, err = importGRPC(byFormat[f])
		case NGINX:
			fl, err = importNginx(byFormat[f], o)
		case HAProxy:
			fl, err = importHAProxy(byFormat[f], o)
		default:
			err = fmt.Errorf("importer: unknown format %q", f)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, fl...)
	}
	if len(out) == 0 {
		return nil, errors.New("importer: the files hold no route, profile or setting with a retry policy to import")
	}
	if len(out) > maxFleets {
		return nil, fmt.Errorf("importer: the files make %d fleets of different settings, more than the %d one import writes (a scenario of %d fleets is about %s to write, and each fleet is a run of its own): import fewer files or routes at once",
			len(out), maxFleets, len(out), sizeOf(int64(len(out))*fleetBytes))
	}
	nameFleets(out)
	for i := range out {
		if err := checkFleet(out[i].Fleet); err != nil {
			return nil, fmt.Errorf("%s: the simulator cannot represent it: %w", out[i].Origin, err)
		}
	}
	return out, nil
}

// Bounds on one import. The items (routes, methods, profiles) are counted
// before any fleet is built, as a run's cost is estimated before it runs;
// identical fleets are kept once, so many routes with the same settings
// cost little. A file is at most maxFileBytes, so these bound the files
// given together.
const (
	maxItems  = 200_000 // routes, methods or profiles in one import
	maxFleets = 2_000   // fleets of different settings one import writes
	// fleetBytes is about what one fleet costs in the scenario file, its
	// notes included.
	fleetBytes = 2 << 10
)

// admit refuses an import of n items (what names them: "routes") before
// it builds any fleet of them.
func admit(f Format, n int, what string) error {
	if n <= maxItems {
		return nil
	}
	return fmt.Errorf("importer: the %s files hold %d %s, more than the %d one import reads (about %s of fleets to build before identical ones are merged): import fewer files at once",
		f, n, what, maxItems, sizeOf(int64(n)*fleetBytes))
}

func sizeOf(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
}

// fleetSet collects one format's fleets, keeping one of each set of
// identical ones, which lists the others in Covers: a config with ten
// thousand routes that share a retry policy is one fleet to simulate.
type fleetSet struct {
	list []Fleet
	seen map[string]int
}

func (s *fleetSet) add(f Fleet) {
	// Two fleets are the same when everything but the name is: their
	// settings, their format and what they could not represent (where
	// each setting came from differs by the route's path only).
	g := f.Fleet
	g.Name = ""
	k := fmt.Sprintf("%s\x00%#v\x00%q", f.Format, g, f.Lost)
	if i, ok := s.seen[k]; ok {
		s.list[i].Covers = append(s.list[i].Covers, f.Origin)
		s.list[i].coversAt = append(s.list[i].coversAt, f.at)
		return
	}
	if s.seen == nil {
		s.seen = map[string]int{}
	}
	s.seen[k] = len(s.list)
	s.list = append(s.list, f)
}

// nameFleets makes every fleet's name one a scenario takes and no other
// fleet has: control, invisible and direction-changing characters
// escaped (a config may hold any), at most maxName bytes, and a number
// added to a name already taken ("a (2)"), skipping those taken too.
func nameFleets(fl []Fleet) {
	used := make(map[string]bool, len(fl))
	for i := range fl {
		f := &fl[i]
		orig := f.Fleet.Name
		esc := escapeName(orig)
		n := strings.TrimSpace(esc)
		if n == "" {
			n = string(f.Format)
		}
		short := clip(n, maxName)
		name := short
		for k := 2; used[name]; k++ {
			suffix := fmt.Sprintf(" (%d)", k)
			name = clip(n, maxName-len(suffix)) + suffix
		}
		used[name] = true
		f.Fleet.Name = name
		switch escaped := esc != orig; {
		case escaped && short != n:
			f.Lost = append(f.Lost, fmt.Sprintf("name %q: its control or invisible characters escaped, and shortened to %d bytes, the most a scenario takes", orig, maxName))
		case escaped:
			f.Lost = append(f.Lost, fmt.Sprintf("name %q: its control or invisible characters escaped (\\x1b, \\u202e), which a scenario's names do not take", orig))
		case short != n:
			f.Lost = append(f.Lost, fmt.Sprintf("name %q: shortened to %d bytes, the most a scenario takes", orig, maxName))
		}
	}
}

// maxName is the longest name a scenario takes, in bytes.
const maxName = 100

// escapeName replaces what a scenario's name must not hold (bytes that are
// not UTF-8, control characters, and characters that print as nothing or
// as something else: format characters such as U+202E, default-ignorable
// ones) with its Go escape.
func escapeName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || !unicode.IsPrint(r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) {
			q := strconv.QuoteToASCII(s[i : i+size])
			b.WriteString(q[1 : len(q)-1])
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// clip shortens s to at most n bytes, at a character's boundary, marking
// the cut with an ellipsis.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = "…"
	cut := n - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.TrimSpace(s[:cut]) + more
}

// checkBase is the scenario checkFleet puts each fleet in.
var checkBase = sync.OnceValue(func() *scenario.Scenario {
	sc, err := scenario.Parse("check.yaml", []byte("name: check\nduration: 10s\ntraffic: {rate: 1}\norigin: {model: capacity, capacity: 1}\nfleets: [{name: x, timeout: 1s, budget: {use: none}}]\n"))
	if err != nil {
		panic("importer: the check scenario: " + err.Error())
	}
	return sc
})

// checkFleet checks f as a scenario's fleet: every importer maps the
// settings it reads into the simulator's ranges, and refuses what the
// product refuses, so an error here is the importer's.
func checkFleet(f scenario.Fleet) error {
	sc := *checkBase()
	sc.Fleets = []scenario.Fleet{f}
	return sc.Validate()
}

var (
	iniSection = regexp.MustCompile(`^\[[^\]]+\]$`)
	envLine    = regexp.MustCompile(`^(export\s+)?AWS_[A-Z0-9_]+\s*=`)
	iniSetting = regexp.MustCompile(`^(retry_mode|max_attempts)\s*=`)
)

// Detect says which format data is in, from its content.
func Detect(name string, data []byte) (Format, error) {
	// The AWS shared config file is INI, which is not YAML ("[default]"
	// reads as a YAML list): look at it first.
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";") {
			continue
		}
		if iniSection.MatchString(l) || envLine.MatchString(l) || iniSetting.MatchString(l) {
			return AWS, nil
		}
		break
	}
	// nginx and HAProxy files are not YAML: know them by their own syntax.
	if f := detectText(name, data); f != "" {
		return f, nil
	}
	docs, err := documents(name, data)
	if err != nil {
		return "", err
	}
	var found Format
	for _, d := range docs {
		f := detectDoc(d)
		if f == "" {
			continue
		}
		if found != "" && found != f {
			return "", fmt.Errorf("%s: holds both %s and %s config: give them as separate files", name, found, f)
		}
		found = f
	}
	if found == "" {
		return "", fmt.Errorf("%s: not a config this tool reads (Envoy, Istio, Linkerd, gRPC service config, AWS SDK settings) nor an nginx or HAProxy config; name the format with --format if it is one", name)
	}
	return found, nil
}

// ngxTopLevel are directives that only an nginx configuration begins with.
var ngxTopLevel = map[string]bool{"http": true, "events": true, "upstream": true, "server": true, "worker_processes": true,
	"user": true, "pid": true, "error_log": true, "include": true, "location": true, "proxy_pass": true, "load_module": true,
	"stream": true, "worker_rlimit_nofile": true, "daemon": true, "master_process": true}

// detectText recognizes an HAProxy file (its first line with words begins
// a section: global, defaults, frontend, backend, listen...) and an nginx
// file (it parses as nginx's syntax and begins with one of nginx's own
// directives), or returns "".
func detectText(name string, data []byte) Format {
	if len(data) > maxFileBytes {
		return ""
	}
	for _, l := range strings.SplitN(string(data), "\n", 200) {
		w, err := hapWords(l)
		if err != nil || len(w) == 0 {
			continue
		}
		if hapSectionKinds[w[0]] && !strings.HasSuffix(w[0], ":") && !strings.ContainsAny(l, "{};") {
			return HAProxy
		}
		break
	}
	ds, err := parseNginx(name, data)
	if err == nil && len(ds) > 0 && ngxTopLevel[ds[0].Name] {
		return NGINX
	}
	return ""
}

func detectDoc(d *yaml.Node) Format {
	if d.Kind != yaml.MappingNode {
		return ""
	}
	api := str(d, "apiVersion")
	switch {
	case strings.Contains(api, "istio.io"):
		return Istio
	case strings.Contains(api, "linkerd.io"):
		return Linkerd
	case (strings.Contains(api, "gateway.networking.k8s.io") || api == "v1") && linkerdAnnotated(d):
		return Linkerd // an HTTPRoute or a Service with Linkerd's retry annotations
	case getAnyCase(d, "methodConfig") != nil || getAnyCase(d, "retryThrottling") != nil || getAnyCase(d, "loadBalancingConfig") != nil:
		// grpc-go reads a service config with encoding/json, whose keys
		// match in any case: "MethodConfig" is its methodConfig.
		return GRPC
	case isIngressConfigMap(d):
		return NGINX // ingress-nginx's ConfigMap
	}
	for _, k := range []string{"static_resources", "virtual_hosts", "circuit_breakers", "outlier_detection", "clusters", "connect_timeout", "routes", "retry_policy", "load_assignment"} {
		if get(d, k) != nil {
			return Envoy
		}
	}
	return ""
}

// Scenario builds the scenario the fleets run in: base's traffic, origin,
// triggers and timing, with the imported fleets in place of its own. It
// returns the notes MarshalNotes writes above each fleet.
func Scenario(fleets []Fleet, base *scenario.Scenario) (*scenario.Scenario, scenario.Notes, error) {
	if base == nil {
		return nil, scenario.Notes{}, errors.New("importer: a base scenario is required")
	}
	sc := *base
	sc.Triggers = slices.Clone(base.Triggers)
	sc.Fleets = nil
	notes := scenario.Notes{
		Head: fmt.Sprintf("Imported by retrystorm import. The traffic, origin and triggers are the %q scenario's:\n"+
			"replace them with your own. Each of its %d clients runs one copy of the fleet's config\n"+
			"(one proxy, one SDK client), with a budget and a breaker of its own.", base.Name, max(base.Traffic.Clients, 1)),
	}
	if sc.Name == "" || sc.Name == base.Name {
		sc.Name = "imported"
	}
	for _, f := range fleets {
		sc.Fleets = append(sc.Fleets, f.Fleet)
		notes.Fleets = append(notes.Fleets, f.Note())
		if f.Replicas > max(sc.Origin.Replicas, 1) && base.Origin.Replicas <= 1 {
			sc.Origin.Replicas = min(f.Replicas, maxReplicas)
		}
	}
	if sc.Origin.Replicas != base.Origin.Replicas {
		notes.Head += fmt.Sprintf("\nThe origin has %d replicas, as the config's upstream has (the most of any fleet's).", sc.Origin.Replicas)
	}
	if err := sc.Validate(); err != nil {
		return nil, scenario.Notes{}, fmt.Errorf("importer: the imported scenario is invalid (a bug: please report it): %w", err)
	}
	return &sc, notes, nil
}

// Note is the comment written above the fleet: where it came from, each
// setting's source, and what was lost.
func (f Fleet) Note() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s)", f.Origin, f.Format)
	for _, v := range f.From {
		b.WriteString("\n  " + v.String())
	}
	if len(f.Lost) > 0 {
		b.WriteString("\nNot represented:")
		for _, l := range f.Lost {
			b.WriteString("\n  - " + l)
		}
	}
	if len(f.Covers) > 0 {
		fmt.Fprintf(&b, "\nThe same settings stand for %d more:", len(f.Covers))
		for _, c := range f.Covers {
			b.WriteString("\n  - " + c)
		}
	}
	return b.String()
}

// Write returns the scenario file for the fleets on base.
func Write(fleets []Fleet, base *scenario.Scenario) ([]byte, error) {
	sc, notes, err := Scenario(fleets, base)
	if err != nil {
		return nil, err
	}
	return scenario.MarshalNotes(sc, notes), nil
}

// wait brings a time the config sets (what names it) into the
// simulator's range, [lo, maxTimeout], with a note when it had to.
func (p *prov) wait(what string, d, lo time.Duration) time.Duration {
	switch {
	case d > maxTimeout:
		p.lose("%s %s: the simulator's longest is %s, and imports it as that", what, fmtDur(d), fmtDur(maxTimeout))
		return maxTimeout
	case d < lo:
		p.lose("%s %s: the simulator's shortest is %s, and imports it as that", what, fmtDur(d), fmtDur(lo))
		return lo
	}
	return d
}

// count brings a count the config sets (what names it) down to the
// simulator's largest, maxCount, with a note when it had to.
func (p *prov) count(what string, n int64) int {
	if n > maxCount {
		p.lose("%s %d: the simulator's largest is %d, and imports it as that", what, n, maxCount)
		return maxCount
	}
	return int(n)
}

// maxCount is the largest count (retries, a concurrency) a scenario takes.
const maxCount = 1_000_000

// maxReplicas is the most replicas a scenario's origin takes.
const maxReplicas = 10_000

// noBackoff is the backoff of a fleet that retries at once, or never.
var noBackoff = scenario.Backoff{Use: "none", Jitter: "none"}

// maxTimeout is the longest attempt timeout a scenario takes: a config
// with no timeout at all is written with it.
const maxTimeout = 24 * time.Hour

// fmtDur writes a duration as the scenario file does.
func fmtDur(d time.Duration) string {
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "us"}} {
		if d != 0 && d%u.unit == 0 {
			return fmt.Sprintf("%d%s", d/u.unit, u.name)
		}
	}
	return d.String()
}
