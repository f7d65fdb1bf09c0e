package scenario

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The scenario file's shape is described once, as tables of fields bound to
// the struct they fill (schema.go). The same table reads a file (Parse),
// writes one (Marshal) and checks a struct (Validate), so the three cannot
// disagree on a key's name, where it applies or how it is spelled.

// value is one field's value as the file spells it: it reads itself from a
// YAML node, writes itself back, and says whether it is unset.
type value interface {
	read(d *decoder, n *yaml.Node, path string) error
	write() *yaml.Node
	zero() bool
}

// field is one key of a YAML map.
type field struct {
	key   string
	kinds []string // the kinds of the map it applies to; nil: all of them
	need  bool     // required wherever it applies: it has no default
	why   string   // replaces "(it has no default)" in the required message
	// unless names another key of the map that stands in for this one:
	// with it, this one is not required, and may not be given.
	unless string
	// optional, when set and true once the map is read, makes the field
	// neither required nor defaulted when absent (a closed loop's rate, a
	// shared scenario's traffic).
	optional func() bool
	v        value
}

// absentDefaults is a value that wraps a map: when the field is absent,
// its map is read as absent all the same, for its defaults and its
// required keys.
type absentDefaults interface{ absentObject() *object }

func (f *field) appliesTo(kind string) bool {
	return f.kinds == nil || slices.Contains(f.kinds, kind)
}

// object is one YAML map of a scenario and the struct it fills. Maps with
// kinds (the origin's model, a budget's use) allow a different set of keys
// for each kind.
type object struct {
	// selector is the key that picks the kind ("model", "use", "kind"), or
	// "" when the map does not hold the kind itself. kind points to where
	// the kind is kept: a settings map shares its parent's.
	selector string
	kind     *string
	kinds    []string
	// defKind is the kind when the map is there without its selector, and
	// absentKind when the whole map is absent; "" means the selector is
	// required.
	defKind, absentKind string
	// what names a kind in messages: a pattern such as "the %s model".
	what   string
	fields []field

	preset func(kind string)           // sets the defaults, once the kind is known
	finish func(has func(string) bool) // sets defaults that depend on other fields
	check  func(c *checker, path string)

	block bool // written in block style; maps are written in flow style by default
}

// kindName returns the map's kind, with the default for an unset one.
func (o *object) kindName() string {
	if o.kind == nil {
		return ""
	}
	if *o.kind == "" {
		return o.absentKind
	}
	return *o.kind
}

// applies reports whether key is a key of the map for kind.
func (o *object) applies(key, kind string) bool {
	return slices.ContainsFunc(o.fields, func(f field) bool { return f.key == key && f.appliesTo(kind) })
}

// keysFor returns the keys the map allows for kind, selector first.
func (o *object) keysFor(kind string) []string {
	var keys []string
	if o.selector != "" {
		keys = append(keys, o.selector)
	}
	for _, f := range o.fields {
		if f.appliesTo(kind) && !slices.Contains(keys, f.key) {
			keys = append(keys, f.key)
		}
	}
	return keys
}

// owners returns the kinds that have key, as a message names them.
func (o *object) owners(key string) string {
	var kinds []string
	for _, f := range o.fields {
		if f.key != key {
			continue
		}
		for _, k := range f.kinds {
			kinds = append(kinds, fmt.Sprintf(o.what, k))
		}
	}
	return oneOf(kinds)
}

// misplaced is the message for a key that belongs to other kinds.
func (o *object) misplaced(key, kind string) string {
	if len(o.keysFor(kind)) == 0 {
		return fmt.Sprintf("%s does not apply: use: %s takes no settings", key, kind)
	}
	return fmt.Sprintf("%s does not apply to %s; it is a setting of %s", key, fmt.Sprintf(o.what, kind), o.owners(key))
}

// read fills the struct from the map n; n is nil when the map is absent,
// which still sets its defaults and finds its missing required keys.
func (o *object) read(d *decoder, n *yaml.Node, path string) error {
	pairs, err := d.pairs(n, path)
	if err != nil {
		return err
	}
	if err := o.readKind(d, n, pairs, path); err != nil {
		return err
	}
	kind := o.kindName()
	if o.preset != nil {
		o.preset(kind)
	}
	given := func(key string) bool { return slices.ContainsFunc(pairs, func(p pair) bool { return p.key == key }) }
	for _, p := range pairs {
		if f, _ := o.lookup(d, p, path, kind); f != nil && f.unless != "" && given(f.unless) {
			return d.errorOn(p.keyNode, join(path, p.key), "%s and %s exclude each other: give one", p.key, f.unless)
		}
	}
	seen := make(map[string]bool, len(pairs))
	for _, p := range pairs {
		if o.selector != "" && p.key == o.selector {
			continue
		}
		f, err := o.lookup(d, p, path, kind)
		if err != nil {
			return err
		}
		seen[p.key] = true
		child := join(path, p.key)
		d.pos[child] = p.val
		if err := f.v.read(d, p.val, child); err != nil {
			return err
		}
	}
	for i := range o.fields {
		f := &o.fields[i]
		if seen[f.key] || !f.appliesTo(kind) {
			continue
		}
		if (f.unless != "" && seen[f.unless]) || (f.optional != nil && f.optional()) {
			continue
		}
		if f.need {
			return d.errorAt(path, "%s", o.required(f, kind))
		}
		sub, ok := f.v.(*object)
		if w, wraps := f.v.(absentDefaults); wraps {
			sub, ok = w.absentObject(), true
		}
		if ok {
			if err := sub.read(d, nil, join(path, f.key)); err != nil {
				return err
			}
		}
	}
	if o.finish != nil {
		o.finish(func(key string) bool { return seen[key] })
	}
	return nil
}

func (o *object) required(f *field, kind string) string {
	msg := f.key + " is required"
	if f.kinds != nil {
		msg += " for " + fmt.Sprintf(o.what, kind)
	}
	if f.why != "" {
		return msg + " " + f.why
	}
	return msg + " (it has no default)"
}

// readKind reads the selector, before any other key: it decides which
// keys the map may hold.
func (o *object) readKind(d *decoder, n *yaml.Node, pairs []pair, path string) error {
	if o.selector == "" {
		return nil
	}
	i := slices.IndexFunc(pairs, func(p pair) bool { return p.key == o.selector })
	switch {
	case i >= 0:
		child := join(path, o.selector)
		d.pos[child] = pairs[i].val
		return word{p: o.kind, words: o.kinds}.read(d, pairs[i].val, child)
	case n == nil && o.absentKind != "":
		*o.kind = o.absentKind
	case n != nil && o.defKind != "":
		*o.kind = o.defKind
	default:
		return d.errorAt(path, "%s is required: %s", o.selector, oneOf(o.kinds))
	}
	return nil
}

// lookup finds the field for key p, or says why there is none.
func (o *object) lookup(d *decoder, p pair, path, kind string) (*field, error) {
	for i := range o.fields {
		if f := &o.fields[i]; f.key == p.key && f.appliesTo(kind) {
			return f, nil
		}
	}
	child := join(path, p.key)
	if slices.ContainsFunc(o.fields, func(f field) bool { return f.key == p.key }) {
		return nil, d.errorOn(p.keyNode, child, "%s", o.misplaced(p.key, kind))
	}
	return nil, d.errorOn(p.keyNode, child, "unknown key %q%s", p.key, didYouMean(p.key, o.keysFor(kind)))
}

// write returns the map as YAML: the selector, then every key that applies
// to the kind, in the table's order. It returns nil for a map with nothing
// to say, so that it is left out.
func (o *object) write() *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	if !o.block {
		n.Style = yaml.FlowStyle
	}
	kind := o.kindName()
	if o.selector != "" {
		n.Content = append(n.Content, plain(o.selector), plain(kind))
	}
	for _, f := range o.fields {
		if !f.appliesTo(kind) {
			continue
		}
		if v := f.v.write(); v != nil {
			n.Content = append(n.Content, plain(f.key), v)
		}
	}
	if len(n.Content) == 0 {
		return nil
	}
	return n
}

func (o *object) zero() bool {
	return !slices.ContainsFunc(o.fields, func(f field) bool { return !f.v.zero() })
}

// validate checks the struct behind the map: a known kind, the map's own
// rules, nothing set that the kind does not use, then every nested value.
func (o *object) validate(c *checker, path string) {
	kind := o.kindName()
	if o.selector != "" && !slices.Contains(o.kinds, kind) {
		c.fail(join(path, o.selector), "must be %s, got %q", oneOf(o.kinds), kind)
		return
	}
	if o.check != nil {
		o.check(c, path)
	}
	for _, f := range o.fields {
		fp := join(path, f.key)
		if !o.applies(f.key, kind) {
			if !f.v.zero() {
				c.fail(fp, "%s", o.misplaced(f.key, kind))
			}
			continue
		}
		if v, ok := f.v.(validator); ok && f.appliesTo(kind) {
			v.validate(c, fp)
		}
	}
}

// keyOf returns the key of the map that o binds to field name of the
// struct at sp (a pointer), or "" when none does: how the loader names, in
// the file's words, a field that resil's own settings type names.
func (o *object) keyOf(sp any, name string) string {
	v := reflect.ValueOf(sp)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return ""
	}
	fv := v.Elem().FieldByName(name)
	if !fv.IsValid() {
		return ""
	}
	addr := fv.Addr().Interface()
	for _, f := range o.fields {
		if b, ok := f.v.(binder); ok && b.bound() == addr {
			return f.key
		}
	}
	return ""
}

// binder is a value bound to one variable: bound returns its address.
type binder interface {
	bound() any
}

// validator is a value with rules of its own: a nested map, a list, a word.
type validator interface {
	validate(c *checker, path string)
}

// list is a YAML list of maps, each filling one T.
type list[T any] struct {
	p    *[]T
	item func(*T) *object
}

func (l list[T]) read(d *decoder, n *yaml.Node, path string) error {
	n = resolve(n)
	if n.Kind != yaml.SequenceNode {
		return d.typeError(n, path, "a list")
	}
	var items []T // nil for an empty list, as for an absent one
	for i, c := range n.Content {
		var t T
		p := fmt.Sprintf("%s[%d]", path, i)
		d.pos[p] = c
		if err := l.item(&t).read(d, c, p); err != nil {
			return err
		}
		items = append(items, t)
	}
	*l.p = items
	return nil
}

func (l list[T]) write() *yaml.Node {
	if len(*l.p) == 0 {
		return nil
	}
	n := &yaml.Node{Kind: yaml.SequenceNode}
	for i := range *l.p {
		n.Content = append(n.Content, l.item(&(*l.p)[i]).write())
	}
	return n
}

func (l list[T]) zero() bool { return len(*l.p) == 0 }

func (l list[T]) validate(c *checker, path string) {
	for i := range *l.p {
		l.item(&(*l.p)[i]).validate(c, fmt.Sprintf("%s[%d]", path, i))
	}
}

// join appends key to a field path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// parent returns the path of the map or list that holds path.
func parent(path string) string {
	return path[:max(0, strings.LastIndexAny(path, ".["))]
}
