package scenario

import (
	"errors"
	"regexp"
	"strings"

	"github.com/retrystorm/retrystorm/resil"
)

// The settings of a budget and of a throttle are resil's own types: the
// file's keys are bound to their fields, their defaults are resil's
// (WithDefaults), and so is the last word on their ranges (Validate). What
// follows reports resil's refusals in the file's words.

// settings checks the settings map o (at path, for kind) against
// defaults, the same map bound to the settings with resil's defaults
// filled in: a 0 where resil would read a default is refused (the file
// writes defaults out, so such a 0 was written on purpose, and resil would
// silently read it as the default); then err, resil's refusal of the
// settings struct at sp, is reported at its key.
func (c *checker) settings(path, kind string, o, defaults *object, sp any, err error) {
	for i, f := range o.fields {
		if f.appliesTo(kind) && f.v.zero() && !defaults.fields[i].v.zero() {
			c.fail(join(path, f.key), "must not be 0: leave it out for the default, %s", defaults.fields[i].v.write().Value)
			return
		}
	}
	if err != nil {
		c.resilError(path, o, sp, err)
	}
}

// resilError reports err, resil's refusal of the settings struct at sp
// (which the object o binds), at the file's key for the field it names,
// in the file's words: the Go field names it mentions become keys, and
// the value given is quoted as the file wrote it.
func (c *checker) resilError(path string, o *object, sp any, err error) {
	se, ok := errors.AsType[*resil.SettingError](err)
	key := ""
	if ok {
		key = o.keyOf(sp, se.Field[strings.LastIndexByte(se.Field, '.')+1:])
	}
	if key == "" {
		c.fail(path, "%v", err)
		return
	}
	field := join(path, key)
	msg := goName.ReplaceAllStringFunc(se.Reason, func(w string) string {
		if k := o.keyOf(sp, w); k != "" {
			return k
		}
		return w
	})
	if se.Value != nil {
		msg = gotValue(msg, c.show(field, se.Value))
	}
	c.fail(field, "%s", msg)
}

// goName is a word that may be the name of a settings field.
var goName = regexp.MustCompile(`\b[A-Z][A-Za-z]*\b`)

// gotValue says what the file gave, after the rule a reason states and
// before why: "must be in (0, 1], got 2; it has no default".
func gotValue(reason, value string) string {
	i := strings.IndexAny(reason, ":;")
	if i < 0 {
		return reason + ", got " + value
	}
	return reason[:i] + ", got " + value + reason[i:]
}
