package importer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/retrystorm/retrystorm/scenario"
)

// The AWS SDKs' settings are lines, not YAML: awsWrite edits them as the
// SDKs read them (parseAWS): keys without regard to case, the sections of
// one profile name as one profile whose later keys win, and the
// environment's AWS_ lines.

// awsEnvKeys are the environment variables of the shared config's keys.
var awsEnvKeys = map[string]string{"retry_mode": "AWS_RETRY_MODE", "max_attempts": "AWS_MAX_ATTEMPTS"}

// awsWrite sets the keys of want (retry_mode, max_attempts) in profile of
// the file data ("environment": its AWS_ lines): a key there is changed
// where the SDK reads it (its last line in the profile), a key that is not
// is added after the profile's last setting.
func awsWrite(name string, data []byte, profile string, want map[string]string) ([]byte, error) {
	lines := strings.SplitAfter(string(data), "\n")
	env := profile == "environment"
	in, found, last := false, false, -1
	where := map[string]int{} // the line each key is read from
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if iniSection.MatchString(t) {
			in = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(t[1:len(t)-1]), "profile ")) == profile
			if in {
				found, last = true, i
			}
			continue
		}
		if t == "" || t[0] == '#' || t[0] == ';' || l[0] == ' ' || l[0] == '\t' {
			continue // a comment, or a nested setting (under "s3 =")
		}
		k, _, _ := strings.Cut(t, "=")
		k = strings.TrimSpace(k)
		if env {
			k = strings.TrimSpace(strings.TrimPrefix(k, "export "))
			for key, e := range awsEnvKeys {
				if k == e {
					where[key], found, last = i, true, i
				}
			}
			continue
		}
		if in {
			where[strings.ToLower(k)], last = i, i
		}
	}
	if !found {
		return nil, fmt.Errorf("%s: profile %s is not there", name, profile)
	}
	for _, k := range []string{"retry_mode", "max_attempts"} {
		v, ok := want[k]
		if !ok {
			continue
		}
		if i, there := where[k]; there {
			lines[i] = awsValueLine(lines[i], v, env)
			continue
		}
		if !strings.HasSuffix(lines[last], "\n") {
			lines[last] += "\n"
		}
		if env {
			prefix := ""
			if strings.HasPrefix(strings.TrimSpace(lines[last]), "export ") {
				prefix = "export "
			}
			lines[last] += prefix + awsEnvKeys[k] + "=" + v + "\n"
		} else {
			lines[last] += k + " = " + v + "\n"
		}
	}
	return []byte(strings.Join(lines, "")), nil
}

// awsValueLine is line (key = value) with value v, its quotes, its
// inline comment and its line end kept.
func awsValueLine(line, v string, env bool) string {
	eq := strings.Index(line, "=")
	body, nl := strings.CutSuffix(line, "\n")
	rest, comment := body[eq+1:], ""
	if i := strings.IndexAny(rest, "#;"); i > 0 && (rest[i-1] == ' ' || rest[i-1] == '\t') {
		rest, comment = rest[:i], " "+rest[i:]
	}
	if r := strings.TrimSpace(rest); env && len(r) > 1 && (r[0] == '"' || r[0] == '\'') {
		v = string(r[0]) + v + string(r[0]) // the line's own quotes
	}
	if !env {
		v = " " + v
	}
	if nl {
		comment += "\n"
	}
	return line[:eq+1] + v + comment
}

// AWS's grid (docs/check.md says why).
var (
	awsModes    = []string{"standard", "adaptive"}
	awsAttempts = []int{1, 2, 3, 4, 5}
)

func awsSpace(w *writer) (space, error) {
	src := slices.IndexFunc(w.srcs, func(s Source) bool { return s.Name == w.loc.file })
	profile, ok := strings.CutPrefix(w.loc.path, "profile ")
	if src < 0 || !ok {
		return space{}, fmt.Errorf("importer: %s is not among the files given", w.loc.file)
	}
	user := w.from.Fleet
	mode := map[string]string{scenario.BudgetAWS: "standard", scenario.BudgetAWSAdaptive: "adaptive"}[user.Budget.Use]
	modes := []option{asIs}
	for _, m := range awsModes {
		if m != mode {
			use := map[string]string{"standard": scenario.BudgetAWS, "adaptive": scenario.BudgetAWSAdaptive}[m]
			modes = append(modes, option{func(w *writer) (string, error) {
				w.doc("aws", kv{Key: "retry_mode", Value: m})
				w.expect(func(g scenario.Fleet) string {
					return unless(g.Retry.MaxRetries == 0 || g.Budget.Use == use, "budget "+g.Budget.Use)
				})
				return "retry_mode " + m, nil
			}})
		}
	}
	attempts, one := []option{asIs}, -1
	for _, n := range awsAttempts {
		if n-1 == user.Retry.MaxRetries {
			continue
		}
		if n == 1 {
			one = len(attempts)
		}
		attempts = append(attempts, option{func(w *writer) (string, error) {
			w.retries = n - 1
			w.doc("aws", kv{Key: "max_attempts", Value: strconv.Itoa(n)})
			w.expect(func(g scenario.Fleet) string {
				return unless(g.Retry.MaxRetries == n-1, fmt.Sprintf("%d retries, not %d", g.Retry.MaxRetries, n-1))
			})
			return fmt.Sprintf("max_attempts %d", n), nil
		}})
	}
	return space{
		dims: [][]option{modes, attempts},
		skip: func(p []int) bool { return p[1] == one && p[0] > 0 },
		finish: func(w *writer) error {
			want := map[string]string{}
			for _, e := range w.docs["aws"] {
				want[e.Key] = e.Value
			}
			s := w.srcs[src]
			after, err := awsWrite(s.Name, s.Data, profile, want)
			if err != nil {
				return err
			}
			w.added = append(w.added, Edited{Name: s.Name, Before: s.Data, After: after, Diff: Diff(s.Name, s.Data, after)})
			return nil
		},
	}, nil
}
