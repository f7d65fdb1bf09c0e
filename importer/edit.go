package importer

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/retrystorm/retrystorm/scenario"
	"go.yaml.in/yaml/v3"
)

// This file edits a user's YAML or JSON document in place: a value is
// replaced where it stands and a missing key is inserted beside its
// siblings, in the document's own style, so that every byte the edit does
// not mean to change stays as it was (comments, order, quoting, the other
// routes and services).

// yamlFile is one user file, parsed with positions.
type yamlFile struct {
	name  string
	src   []byte
	json  bool  // a JSON document: values are written as JSON
	lines []int // the offset of each line's start
	docs  []*yaml.Node
	edits []textEdit
	style *keyStyle // fileStyle, once found
}

// textEdit replaces src[start:end] with text.
type textEdit struct {
	start, end int
	text       string
}

func parseYAMLFile(s Source) (*yamlFile, error) {
	docs, err := documents(s.Name, s.Data)
	if err != nil {
		return nil, err
	}
	f := &yamlFile{name: s.Name, src: s.Data, docs: docs, lines: []int{0}}
	for i, b := range s.Data {
		if b == '\n' {
			f.lines = append(f.lines, i+1)
		}
	}
	t := bytes.TrimSpace(s.Data)
	f.json = len(t) > 0 && (t[0] == '{' || t[0] == '[')
	return f, nil
}

// offset is the byte offset of a node's first character.
func (f *yamlFile) offset(n *yaml.Node) (int, error) {
	if n.Line < 1 || n.Line > len(f.lines) {
		return 0, fmt.Errorf("%s: no position for a value", f.name)
	}
	// yaml.v3 counts columns in characters: walk the line's runes.
	off, col := f.lines[n.Line-1], 1
	for col < n.Column && off < len(f.src) {
		_, size := utf8.DecodeRune(f.src[off:])
		off += size
		col++
	}
	return off, nil
}

// scalarEnd is the end offset of the scalar starting at off.
func (f *yamlFile) scalarEnd(n *yaml.Node, off int) (int, error) {
	src := f.src
	switch {
	case n.Style&yaml.DoubleQuotedStyle != 0:
		for i := off + 1; i < len(src); i++ {
			switch src[i] {
			case '\\':
				i++
			case '"':
				return i + 1, nil
			}
		}
	case n.Style&yaml.SingleQuotedStyle != 0:
		for i := off + 1; i < len(src); i++ {
			if src[i] == '\'' {
				if i+1 < len(src) && src[i+1] == '\'' {
					i++
					continue
				}
				return i + 1, nil
			}
		}
	case n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) == 0:
		if bytes.HasPrefix(src[off:], []byte(n.Value)) {
			return off + len(n.Value), nil
		}
	}
	return 0, fmt.Errorf("%s:%d: the value %q cannot be edited in place", f.name, n.Line, n.Value)
}

// render writes a scalar in the file's style, as the node it replaces was
// written when there is one: quoted stays quoted.
func (f *yamlFile) render(v string, quoted bool, old *yaml.Node) string {
	if f.json {
		if quoted {
			return strconv.Quote(v)
		}
		return v
	}
	if old != nil && old.Style&yaml.DoubleQuotedStyle != 0 {
		return strconv.Quote(v)
	}
	if old != nil && old.Style&yaml.SingleQuotedStyle != 0 {
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	}
	if quoted {
		// A string that would not read back as one (an annotation's "2"),
		// or would end a flow mapping early (a comma), is quoted.
		return yamlScalar(v)
	}
	return v
}

// kv is a key and its value to write: a scalar (Value, Quoted) or a
// mapping (Map).
type kv struct {
	Key    string
	Value  string
	Quoted bool // a string, quoted in JSON
	Map    []kv
}

// child returns the value of key in mapping m, or nil. The key matches in
// any spelling the products read (spelling.go): the edit changes the key
// the file has.
func child(m *yaml.Node, key string) *yaml.Node {
	m = deref(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if fold(m.Content[i].Value) == fold(key) {
			return m.Content[i+1]
		}
	}
	return nil
}

// lookup follows a path such as "spec.http[0].retries" from n.
func lookup(n *yaml.Node, path string) *yaml.Node {
	for _, part := range strings.Split(path, ".") {
		if part == "" {
			continue
		}
		key, idx, hasIdx := strings.Cut(part, "[")
		if key != "" {
			if n = child(n, key); n == nil {
				return nil
			}
		}
		for hasIdx {
			i, rest, _ := strings.Cut(idx, "]")
			k, err := strconv.Atoi(i)
			n = deref(n)
			if err != nil || n == nil || n.Kind != yaml.SequenceNode || k < 0 || k >= len(n.Content) {
				return nil
			}
			n = n.Content[k]
			idx, hasIdx = strings.CutPrefix(rest, "[")
		}
	}
	return deref(n)
}

// set writes the values of kvs into mapping m: a scalar that is there is
// replaced in place, a mapping that is there is descended into, and a
// key that is not there is inserted with all its values.
func (f *yamlFile) set(m *yaml.Node, kvs []kv) error {
	m = deref(m)
	if m == nil || m.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: not a mapping where the edit goes", f.name)
	}
	var missing []kv
	for _, e := range kvs {
		old := child(m, e.Key)
		switch {
		case old == nil:
			missing = append(missing, e)
		case e.Map != nil:
			if err := f.set(old, e.Map); err != nil {
				return err
			}
		default:
			if old.Kind != yaml.ScalarNode {
				return fmt.Errorf("%s:%d: %s is not a single value", f.name, old.Line, e.Key)
			}
			if old.Value == e.Value {
				continue
			}
			start, err := f.offset(old)
			if err != nil {
				return err
			}
			end, err := f.scalarEnd(old, start)
			if err != nil {
				return err
			}
			f.edits = append(f.edits, textEdit{start, end, f.render(e.Value, e.Quoted, old)})
		}
	}
	if len(missing) > 0 {
		return f.insert(m, missing)
	}
	return nil
}

// insert adds kvs to mapping m beside its keys, spelt as its keys are.
func (f *yamlFile) insert(m *yaml.Node, kvs []kv) error {
	kvs = f.respell(m, kvs)
	if m.Style&yaml.FlowStyle != 0 || f.json {
		return f.insertFlow(m, kvs)
	}
	if len(m.Content) == 0 {
		return fmt.Errorf("%s:%d: an empty block mapping cannot be edited in place", f.name, m.Line)
	}
	indent := m.Content[0].Column - 1
	// After the last line of the mapping's last value.
	last := lastLine(m)
	at := len(f.src)
	if last < len(f.lines) {
		at = f.lines[last]
	}
	var b strings.Builder
	if at == len(f.src) && len(f.src) > 0 && f.src[len(f.src)-1] != '\n' {
		b.WriteString("\n")
	}
	f.writeBlock(&b, kvs, indent)
	f.edits = append(f.edits, textEdit{at, at, b.String()})
	return nil
}

func (f *yamlFile) writeBlock(b *strings.Builder, kvs []kv, indent int) {
	pad := strings.Repeat(" ", indent)
	for _, e := range kvs {
		if e.Map != nil {
			fmt.Fprintf(b, "%s%s:\n", pad, e.Key)
			f.writeBlock(b, e.Map, indent+2)
			continue
		}
		fmt.Fprintf(b, "%s%s: %s\n", pad, e.Key, f.render(e.Value, e.Quoted, nil))
	}
}

func (f *yamlFile) flow(kvs []kv) string {
	var parts []string
	for _, e := range kvs {
		k := e.Key
		if f.json {
			k = strconv.Quote(k)
		}
		if e.Map != nil {
			parts = append(parts, k+": {"+f.flow(e.Map)+"}")
			continue
		}
		parts = append(parts, k+": "+f.render(e.Value, e.Quoted, nil))
	}
	return strings.Join(parts, ", ")
}

// insertFlow adds kvs to a flow mapping ({...}, or JSON): before its
// first key, on a line of their own when the keys are on lines of their
// own.
func (f *yamlFile) insertFlow(m *yaml.Node, kvs []kv) error {
	start, err := f.offset(m)
	if err != nil {
		return err
	}
	if start >= len(f.src) || f.src[start] != '{' {
		return fmt.Errorf("%s:%d: a mapping that does not start with { cannot be edited in place", f.name, m.Line)
	}
	if len(m.Content) == 0 {
		end := bytes.IndexByte(f.src[start:], '}')
		if end < 0 {
			return fmt.Errorf("%s:%d: an unclosed mapping", f.name, m.Line)
		}
		f.edits = append(f.edits, textEdit{start + 1, start + end, f.flow(kvs)})
		return nil
	}
	first := m.Content[0]
	at, err := f.offset(first)
	if err != nil {
		return err
	}
	if first.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 && at > 0 && (f.src[at-1] == '"' || f.src[at-1] == '\'') {
		at-- // yaml.v3 may place a quoted key after its quote
	}
	sep := ", "
	if first.Line > m.Line {
		sep = ",\n" + strings.Repeat(" ", first.Column-1)
	}
	var parts []string
	for _, e := range kvs {
		parts = append(parts, f.flow([]kv{e}))
	}
	f.edits = append(f.edits, textEdit{at, at, strings.Join(parts, sep) + sep})
	return nil
}

// lastLine is the last line a node's text is on.
func lastLine(n *yaml.Node) int {
	l := n.Line
	for _, c := range n.Content {
		l = max(l, lastLine(c))
	}
	if n.Kind == yaml.ScalarNode && n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		l += strings.Count(n.Value, "\n")
	}
	return l
}

// apply returns the file with its edits made.
func (f *yamlFile) apply() ([]byte, error) {
	es := slices.Clone(f.edits)
	// At one place, insertions go before a replacement, and of two
	// insertions the more indented first: its keys end the mapping that
	// ends there, which the other's follow.
	slices.SortStableFunc(es, func(a, b textEdit) int {
		return cmp.Or(a.start-b.start, (a.end-a.start)-(b.end-b.start), indentOf(b.text)-indentOf(a.text))
	})
	var out []byte
	at := 0
	for _, e := range es {
		if e.start < at {
			return nil, errors.New("importer: two edits overlap")
		}
		out = append(out, f.src[at:e.start]...)
		out = append(out, e.text...)
		at = e.end
	}
	return append(out, f.src[at:]...), nil
}

// Diff writes the change from before to after as a unified diff of
// lines, with three lines of context, that patch -p0 applies to the file
// name (before nil: a new file, from /dev/null).
func Diff(name string, before, after []byte) string {
	all := lineOps(diffLines(before), diffLines(after))
	if !slices.ContainsFunc(all, func(o diffOp) bool { return o.kind != ' ' }) {
		return ""
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s (advised)\n", diffName(name, before == nil), diffName(name, false))
	// The lines before each op in either file, for the hunk headers.
	aBefore, bBefore := make([]int, len(all)+1), make([]int, len(all)+1)
	var changed []int
	for i, o := range all {
		aBefore[i+1], bBefore[i+1] = aBefore[i], bBefore[i]
		if o.kind != '+' {
			aBefore[i+1]++
		}
		if o.kind != '-' {
			bBefore[i+1]++
		}
		if o.kind != ' ' {
			changed = append(changed, i)
		}
	}
	const ctx = 3
	for g := 0; g < len(changed); {
		h := g
		for h+1 < len(changed) && changed[h+1]-changed[h] <= 2*ctx {
			h++
		}
		lo, hi := max(changed[g]-ctx, 0), min(changed[h]+ctx+1, len(all))
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(aBefore[lo], aBefore[hi]), hunkRange(bBefore[lo], bBefore[hi]))
		for _, o := range all[lo:hi] {
			writeDiffLine(&out, o.kind, o.line)
		}
		g = h + 1
	}
	return out.String()
}

func splitLines(b []byte) []string {
	s := string(b)
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// Edited is one of the user's files with the recommendation written into
// it.
type Edited struct {
	Name          string
	Before, After []byte
	// Diff is the change as a unified diff against the user's file.
	Diff string
}

// location is where an imported fleet came from, read from its Origin
// ("file: [Kind name: ]path[ (more)]").
type location struct {
	file, object, path, cluster, host string
}

func parseOrigin(origin string) location {
	var l location
	file, rest, _ := strings.Cut(origin, ": ")
	l.file = file
	if i := strings.Index(rest, " ("); i >= 0 {
		extra := rest[i+2:]
		rest = rest[:i]
		if c, ok := strings.CutPrefix(extra, "cluster "); ok {
			l.cluster, _ = strconv.Unquote(strings.TrimSuffix(c, ")"))
		}
		if h, ok := strings.CutPrefix(extra, "host "); ok {
			l.host, _, _ = strings.Cut(strings.TrimSuffix(h, ")"), ", ")
		}
	}
	if obj, path, ok := strings.Cut(rest, ": "); ok {
		l.object, rest = obj, path
	} else if defaultRoute(origin) {
		l.object, rest = rest, "" // "DestinationRule name": the whole object
	}
	l.path = rest
	return l
}

// Edit writes the policy rec into the user's own files, at the object the
// imported fleet from came from: the route's retry policy, its cluster's
// or DestinationRule's retry budget, the method config, the profile. Only
// the settings in which rec differs from the fleet as imported are
// written; the scope (names, routes, hosts, profiles), the retry
// conditions unless rec changes them, and every other byte stay as they
// were. It returns each file it changed, with the diff, and what it could
// not write (with what it kept instead). Each edited file must pass the
// product's own parser (ValidateEdited: an error wrapping ErrNotAccepted),
// and the edited files, imported again, must read back as rec in what the
// format writes (an error wrapping ErrReadBack). A host that no Istio
// VirtualService routes gets a new VirtualService document, an Edited
// whose Before is nil.
func Edit(srcs []Source, from Fleet, rec scenario.Fleet) ([]Edited, []string, error) {
	loc := parseOrigin(from.Origin)
	files := map[string]*yamlFile{}
	var order []string
	open := func(name string) (*yamlFile, error) {
		if f, ok := files[name]; ok {
			return f, nil
		}
		for _, s := range srcs {
			if s.Name == name {
				f, err := parseYAMLFile(s)
				if err != nil {
					return nil, err
				}
				files[name] = f
				order = append(order, name)
				return f, nil
			}
		}
		return nil, fmt.Errorf("importer: %s is not among the files given", name)
	}
	user := from.Fleet
	var notes []string
	var err error
	var text []Edited
	switch from.Format {
	case GRPC:
		notes, err = editGRPC(open, loc, user, rec)
	case Envoy:
		notes, err = editEnvoy(open, srcs, loc, user, rec)
	case Istio:
		if defaultRoute(from.Origin) {
			text, notes, err = editIstioDefault(open, srcs, loc, user, rec)
		} else {
			notes, err = editIstio(open, srcs, loc, user, rec)
		}
	case Linkerd:
		notes, err = editLinkerd(open, srcs, loc, user, rec)
	case AWS:
		text, notes, err = editAWS(srcs, loc, user, rec)
	case NGINX:
		text, notes, err = editNginx(srcs, from, rec)
	case HAProxy:
		text, notes, err = editHAProxy(srcs, from, rec)
	default:
		return nil, nil, fmt.Errorf("importer: cannot edit a %s file", from.Format)
	}
	if err != nil {
		return nil, nil, err
	}
	out := text // the files edited as text (AWS, nginx, HAProxy)
	for _, name := range order {
		f := files[name]
		after, err := f.apply()
		if err != nil {
			return nil, nil, err
		}
		if !bytes.Equal(after, f.src) {
			out = append(out, Edited{Name: name, Before: f.src, After: after, Diff: Diff(name, f.src, after)})
		}
	}
	if _, err := checkEdit(srcs, out, from, asWritten(from, rec), Options{Timeout: from.Fleet.Timeout}); err != nil {
		return nil, nil, err
	}
	return out, notes, nil
}

// Differences lists the settings format can write in which got differs
// from want: the retry count, the backoff, the retry conditions and the
// budget.
func Differences(got, want scenario.Fleet, format Format) []string {
	var d []string
	if got.Retry.MaxRetries != want.Retry.MaxRetries {
		d = append(d, fmt.Sprintf("max_retries %d, not %d", got.Retry.MaxRetries, want.Retry.MaxRetries))
	}
	if !slices.Equal(got.Retry.On, want.Retry.On) {
		d = append(d, fmt.Sprintf("retry.on %v, not %v", got.Retry.On, want.Retry.On))
	}
	if format != Linkerd && format != AWS && format != NGINX && format != HAProxy && want.Retry.MaxRetries != 0 && got.Retry.Backoff.Base != want.Retry.Backoff.Base {
		d = append(d, fmt.Sprintf("backoff base %v, not %v", got.Retry.Backoff.Base, want.Retry.Backoff.Base))
	}
	if (format == Envoy || format == GRPC) && want.Retry.MaxRetries != 0 && got.Retry.Backoff.Cap != want.Retry.Backoff.Cap {
		d = append(d, fmt.Sprintf("backoff cap %v, not %v", got.Retry.Backoff.Cap, want.Retry.Backoff.Cap))
	}
	gb, wb := got.Budget, want.Budget
	same := gb.Use == wb.Use
	switch wb.Use {
	case scenario.BudgetConcurrency:
		same = same && gb.Concurrency == wb.Concurrency
	case scenario.BudgetGRPC:
		same = same && gb.GRPC.MaxTokens == wb.GRPC.MaxTokens && gb.GRPC.TokenRatio == wb.GRPC.TokenRatio
	case scenario.BudgetWindow:
		same = same && gb.Window.Ratio == wb.Window.Ratio && gb.Window.MinRetriesPerSecond == wb.Window.MinRetriesPerSecond && gb.Window.TTL == wb.Window.TTL
	}
	if !same && want.Retry.MaxRetries != 0 {
		d = append(d, fmt.Sprintf("budget %s, not %s", describeBudget(gb), describeBudget(wb)))
	}
	return d
}

func describeBudget(b scenario.Budget) string {
	switch b.Use {
	case scenario.BudgetConcurrency:
		return fmt.Sprintf("concurrency %g%%/%d", b.Concurrency.Percent, b.Concurrency.MinConcurrency)
	case scenario.BudgetGRPC:
		return fmt.Sprintf("gRPC throttling %g/%g", b.GRPC.MaxTokens, b.GRPC.TokenRatio)
	case scenario.BudgetWindow:
		return fmt.Sprintf("%s of ratio %g", b.Use, b.Window.Ratio)
	case scenario.BudgetTokenBucket:
		return fmt.Sprintf("%s of ratio %g", b.Use, b.TokenBucket.Ratio)
	}
	return cmpOr(b.Use, "none")
}

// findDoc returns the document of kind and name (metadata.name) in the
// files, and the file.
func findDoc(open func(string) (*yamlFile, error), srcs []Source, match func(*yaml.Node) bool) (*yamlFile, *yaml.Node, error) {
	for _, s := range srcs {
		f, err := open(s.Name)
		if err != nil {
			continue // another format's file
		}
		for _, d := range f.docs {
			if match(d) {
				return f, d, nil
			}
		}
	}
	return nil, nil, nil
}

// replaceValue replaces a whole value (a list, a mapping) with text.
func (f *yamlFile) replaceValue(n *yaml.Node, text string) error {
	if n == nil {
		return fmt.Errorf("%s: no value to replace", f.name)
	}
	start, err := f.offset(n)
	if err != nil {
		return err
	}
	if n.Kind == yaml.ScalarNode {
		end, err := f.scalarEnd(n, start)
		if err != nil {
			return err
		}
		f.edits = append(f.edits, textEdit{start, end, text})
		return nil
	}
	open, closer := byte('['), byte(']')
	if n.Kind == yaml.MappingNode {
		open, closer = '{', '}'
	}
	if n.Style&yaml.FlowStyle == 0 && !f.json || start >= len(f.src) || f.src[start] != open {
		return fmt.Errorf("%s:%d: only a value written inline ([...] or {...}) can be replaced in place", f.name, n.Line)
	}
	depth := 0
	for i := start; i < len(f.src); i++ {
		switch f.src[i] {
		case open:
			depth++
		case closer:
			if depth--; depth == 0 {
				f.edits = append(f.edits, textEdit{start, i + 1, text})
				return nil
			}
		}
	}
	return fmt.Errorf("%s:%d: an unclosed value", f.name, n.Line)
}
