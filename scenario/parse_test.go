package scenario

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrystorm/retrystorm/resil/budget"
)

// head is the smallest valid start of a file: lines 1 to 3. fleet makes it
// a whole scenario: lines 4 and 5.
const (
	head  = "duration: 60s\ntraffic: {rate: 10}\norigin: {model: capacity, capacity: 10}\n"
	fleet = "fleets:\n  - {name: a, timeout: 1s, budget: {use: none}}\n"
)

// withFleet is head followed by one fleet written out on lines 4 to 7,
// with extra appended to it: line 8 on.
func withFleet(extra string) string {
	return head + "fleets:\n  - name: a\n    timeout: 1s\n    budget: {use: none}\n" + extra
}

// parseErrorTests holds one bad input per row, and where and what the
// error must say. FuzzParse starts from them too.
var parseErrorTests = []struct {
	name  string
	in    string
	at    string // "line:col", "line" or "" (none)
	field string
	msg   string // a fragment of Msg
}{
	// The file as a whole.
	{"empty file", "", "", "", "the file is empty"},
	{"only comments", "# nothing\n\n", "", "", "the file is empty"},
	{"bare document marker", "---\n", "", "", "the file is empty"},
	{"two documents", head + fleet + "---\nduration: 1s\n", "7:1", "", "a second YAML document"},
	{"syntax: unclosed flow map", "duration: 60s\ntraffic: {rate: 10\n", "2", "", "invalid YAML: did not find expected ',' or '}'"},
	{"syntax: bad indentation", "duration: 60s\ntraffic:\n  rate: 10\n clients: 3\n", "4", "", "invalid YAML: did not find expected key"},
	{"syntax: tab", "duration: 60s\ntraffic:\n\trate: 10\n", "3", "", "invalid YAML: found character that cannot start any token"},
	{"a list at the top", "- duration: 60s\n", "1:1", "", "must be a map (key: value), got a list"},
	{"a string at the top", "storm\n", "1:1", "", `must be a map (key: value), got the string "storm"`},
	{"too large", "name: " + strings.Repeat("x", maxFileSize) + "\n", "", "", "too large"},
	// The YAML scanner's errors that carry no line get one.
	{"invalid UTF-8", "duration: 60s\ntraffic: {rate: \xff}\n", "2:17", "", "invalid YAML: invalid UTF-8 (byte 0xff)"},
	{"invalid UTF-8 after multibyte", "name: \u00e9t\u00e9\nseed: \xe2\x82\n", "2:7", "", "invalid UTF-8"},
	{"NUL byte", "duration: 60s\n\nname: a\x00b\n", "3:8", "", "a control character (U+0000) is not allowed"},
	{"escape character", "name: \x1b[41mEVIL\n", "1:7", "", "a control character (U+001B) is not allowed"},
	{"C1 control", "name: a\u0085\u009bb\n", "1:9", "", "a control character (U+009B) is not allowed"},
	{"undefined alias", head + "fleets: *nope\n", "4:9", "", "unknown anchor 'nope' referenced"},

	// Keys.
	{"unknown key", "duraton: 60s\n", "1:1", "duraton", `unknown key "duraton"; did you mean "duration"?`},
	{"unknown key, camel case", withFleet("    retry: {maxRetries: 3}\n"), "8:13", "fleets[0].retry.maxRetries", `did you mean "max_retries"?`},
	{"unknown key, nothing close", head + "colour: red\n", "4:1", "colour", `unknown key "colour" (expected name, seed, duration, tick, shared, traffic, origin, tiers, triggers or fleets)`},
	{"duplicate key", "duration: 60s\nduration: 30s\n", "2:1", "duration", `duplicate key "duration" (first at line 1)`},
	{"duplicate key in a flow map", "duration: 60s\ntraffic: {rate: 10, rate: 20}\n", "2:21", "traffic.rate", "duplicate key"},
	{"merge key", head + "fleets:\n  - &a {name: a, timeout: 1s, budget: {use: none}}\n  - {<<: *a, name: b}\n", "6:6", "fleets[1]", "merge keys (<<) are not supported"},
	{"key that is a list", "? [a]\n: 1\n", "1:3", "", "a key must be a plain word, got a list"},

	// Types.
	{"duration as a bare number", "duration: 30\n", "1:11", "duration", `must be a duration with a unit, such as "30s", "100ms" or "1m30s", got the number 30`},
	{"duration as a quoted number", `duration: "30"` + "\n", "1:11", "duration", `"30" is not a duration: write a duration with a unit`},
	{"duration with a space", "duration: 30 s\n", "1:11", "duration", `"30 s" is not a duration`},
	{"number as a string", "duration: 60s\ntraffic: {rate: \"100\"}\n", "2:17", "traffic.rate", `must be a number, got the string "100" (remove the quotes)`},
	{"number as a word", "duration: 60s\ntraffic: {rate: many}\n", "2:17", "traffic.rate", `must be a number, got the string "many"`},
	{"not a finite number", "duration: 60s\ntraffic: {rate: .inf}\n", "2:17", "traffic.rate", "must be a finite number"},
	{"a list where a map goes", "duration: 60s\ntraffic: [1, 2]\n", "2:10", "traffic", "must be a map (key: value), got a list"},
	{"a map where a list goes", head + "fleets: {name: a}\n", "4:9", "fleets", "must be a list, got a map"},
	{"nothing where a map goes", "duration: 60s\ntraffic:\norigin: {model: capacity, capacity: 1}\n", "2:9", "traffic", "must be a map (key: value), got nothing"},
	{"fraction where a whole number goes", "duration: 60s\ntraffic: {rate: 10, clients: 2.5}\n", "2:30", "traffic.clients", "must be a whole number, got the number 2.5"},
	{"whole number out of range", "duration: 60s\ntraffic: {rate: 10, clients: 0x7fffffffffffffffff}\norigin: {model: capacity, capacity: 10}\n" + fleet, "2:30", "traffic.clients", "must be in [1, 1000000], got 0x7fffffffffffffffff"},
	{"whole number beyond uint64", "duration: 60s\ntraffic: {rate: 10, clients: 18446744073709551616}\norigin: {model: capacity, capacity: 10}\n" + fleet, "2:30", "traffic.clients", "must be in [1, 1000000], got 18446744073709551616"},
	{"whole number beyond int64", "duration: 60s\ntraffic: {rate: 10, clients: 9223372036854775808}\norigin: {model: capacity, capacity: 10}\n" + fleet, "2:30", "traffic.clients", "must be in [1, 1000000], got 9223372036854775808"},
	{"negative whole number beyond int64", "duration: 60s\ntraffic: {rate: 10}\norigin: {model: queue, capacity: 10, queue_limit: -99999999999999999999}\n" + fleet, "3:51", "origin.queue_limit", "must be in [0, 1000000000], got -99999999999999999999"},
	{"number beyond float64", "duration: 60s\ntraffic: {rate: 1e400}\norigin: {model: capacity, capacity: 10}\n" + fleet, "2:17", "traffic.rate", "must be in (0, 1000000], got 1e400"},
	{"aws cost beyond int64", head + "fleets:\n  - {name: a, timeout: 1s, budget: {use: aws, settings: {retry_cost: 99999999999999999999}}}\n", "5:70", "fleets[0].budget.settings.retry_cost", "must be in [1, 500], got 99999999999999999999"},
	{"max_retries beyond int64", withFleet("    retry: {max_retries: 99999999999999999999}\n"), "8:26", "fleets[0].retry.max_retries", "must be in [0, 1000000], got 99999999999999999999"},
	{"seed beyond uint64", "seed: 18446744073709551616\n", "1:7", "seed", "must be at most 18446744073709551615"},
	{"yes is not a boolean", withFleet("    retry: {idempotent_only: yes}\n"), "8:30", "fleets[0].retry.idempotent_only", `must be true or false, got the string "yes"`},
	{"negative seed", "seed: -1\n", "1:7", "seed", "must not be negative"},
	{"negative seed beyond int64", "seed: -0x1_0000_0000_0000_0000\n", "1:7", "seed", "must not be negative"},
	{"fractional seed", "seed: 1.5\n", "1:7", "seed", "must be a whole number"},
	{"name as a number", "name: 12\n", "1:7", "name", "must be a string"},
	{"max_retries as a word", withFleet("    retry: {max_retries: lots}\n"), "8:26", "fleets[0].retry.max_retries", `must be a whole number or unlimited, got the string "lots"`},
	{"max_retries negative", withFleet("    retry: {max_retries: -1}\n"), "8:26", "fleets[0].retry.max_retries", "write unlimited"},

	// Kinds and the keys they allow.
	{"unknown model", "duration: 60s\ntraffic: {rate: 10}\norigin: {model: queu, capacity: 10}\n", "3:17", "origin.model", `unknown value "queu"; did you mean "queue"?`},
	{"no model", "duration: 60s\ntraffic: {rate: 10}\norigin: {capacity: 10}\n", "3:9", "origin", "model is required: capacity, queue or concurrency"},
	{"unknown trigger kind", head + "triggers: [{kind: outages, for: 1s}]\n" + fleet, "4:19", "triggers[0].kind", `did you mean "outage"?`},
	{"unknown outage mode", head + "triggers: [{kind: outage, for: 1s, mode: stal}]\n" + fleet, "4:42", "triggers[0].mode", `unknown value "stal"; did you mean "stall"?`},
	{"outage mode as a number", head + "triggers: [{kind: outage, for: 1s, mode: 1}]\n" + fleet, "4:42", "triggers[0].mode", "must be refuse, refuse_pod, blackhole or stall"},
	{"mode on another trigger", head + "triggers: [{kind: errors, for: 1s, error_rate: 0.1, mode: refuse}]\n" + fleet, "4:53", "triggers[0].mode", "mode does not apply to kind: errors; it is a setting of kind: outage"},
	{"unknown budget", withFleet("")[:len(withFleet(""))-len("    budget: {use: none}\n")] + "    budget: {use: tokenbucket}\n", "7:19", "fleets[0].budget.use", `did you mean "token_bucket"?`},
	{"unknown breaker", withFleet("    breaker: {use: consec}\n"), "8:20", "fleets[0].breaker.use", "unknown value \"consec\""},
	{"unknown jitter", withFleet("    retry: {backoff: {use: fixed, base: 1s, jitter: ful}}\n"), "8:53", "fleets[0].retry.backoff.jitter", `did you mean "full"?`},
	{"unknown arrivals", "duration: 60s\ntraffic:\n  rate: 10\n  arrivals: possion\n", "4:13", "traffic.arrivals", `did you mean "poisson"?`},
	{"setting of another model", "duration: 60s\ntraffic: {rate: 10}\norigin: {model: capacity, capacity: 10, workers: 3}\n", "3:41", "origin.workers", "workers does not apply to the capacity model; it is a setting of the queue model"},
	{"threshold on a time window breaker", withFleet("    breaker: {use: time_window, settings: {window: 10s, failure_rate: 0.5, threshold: 5}}\n"), "8:76", "fleets[0].breaker.settings.threshold", "threshold does not apply to time_window; it is a setting of consecutive"},
	{"settings for use none", withFleet("    breaker: {use: none, settings: {threshold: 5}}\n"), "8:37", "fleets[0].breaker.settings.threshold", "does not apply: use: none takes no settings"},
	{"multiplier with fixed", withFleet("    retry: {backoff: {use: fixed, base: 1s, multiplier: 3}}\n"), "8:45", "fleets[0].retry.backoff.multiplier", "multiplier does not apply to use: fixed; it is a setting of use: exponential"},
	{"typo in a setting", withFleet("    breaker: {use: consecutive, settings: {treshold: 5}}\n"), "8:44", "fleets[0].breaker.settings.treshold", `did you mean "threshold"?`},
	{"factor on a load trigger", head + "triggers: [{kind: load, for: 1s, rate: 5, factor: 2}]\n" + fleet, "4:43", "triggers[0].factor", "factor does not apply to kind: load; it is a setting of kind: latency"},

	// Required keys.
	{"no duration", "traffic: {rate: 10}\norigin: {model: capacity, capacity: 10}\n" + fleet, "1:1", "", "duration is required (it has no default)"},
	{"no rate", "duration: 60s\ntraffic: {clients: 3}\n", "2:10", "traffic", "rate is required (it has no default; or give a series)"},
	{"no traffic", "duration: 60s\norigin: {model: capacity, capacity: 10}\n" + fleet, "1:1", "traffic", "rate is required"},
	{"no fleets", head, "1:1", "", "fleets is required"},
	{"empty fleets", head + "fleets: []\n", "4:9", "fleets", "at least one fleet is required"},
	{"no capacity", "duration: 60s\ntraffic: {rate: 10}\norigin: {model: queue}\n", "3:9", "origin", "capacity is required for the queue model (it has no default)"},
	{"no base", "duration: 60s\ntraffic: {rate: 10}\norigin: {model: concurrency}\n", "3:9", "origin", "base is required for the concurrency model"},
	{"no fleet name", head + "fleets:\n  - {timeout: 1s, budget: {use: none}}\n", "5:5", "fleets[0]", "name is required"},
	{"no timeout", head + "fleets:\n  - {name: a, budget: {use: none}}\n", "5:5", "fleets[0]", "timeout is required (it has no default)"},
	{"no budget", head + "fleets:\n  - {name: a, timeout: 1s}\n", "5:5", "fleets[0]", "budget is required (write budget: {use: none} for none)"},
	{"budget without use", head + "fleets:\n  - {name: a, timeout: 1s, budget: {}}\n", "5:36", "fleets[0].budget", "use is required: none, token_bucket, window, grpc, aws, concurrency or aws_adaptive"},
	{"token bucket without budget_ratio", withFleet("")[:len(withFleet(""))-len("    budget: {use: none}\n")] + "    budget: {use: token_bucket, settings: {min_tokens: 10}}\n", "7:43", "fleets[0].budget.settings", "budget_ratio is required for token_bucket (it has no default)"},
	{"token bucket without settings", head + "fleets:\n  - {name: a, timeout: 1s, budget: {use: token_bucket}}\n", "5:36", "fleets[0].budget.settings", "budget_ratio is required for token_bucket (it has no default)"},
	{"window without budget_ratio", head + "fleets:\n  - {name: a, timeout: 1s, budget: {use: window, settings: {ttl: 5s}}}\n", "5:60", "fleets[0].budget.settings", "budget_ratio is required for window"},
	{"grpc without token_ratio", head + "fleets:\n  - {name: a, timeout: 1s, budget: {use: grpc, settings: {max_tokens: 10}}}\n", "5:58", "fleets[0].budget.settings", "token_ratio is required for grpc"},
	{"breaker without use", withFleet("    breaker: {settings: {threshold: 5}}\n"), "8:14", "fleets[0].breaker", "use is required"},
	{"consecutive without threshold", withFleet("    breaker: {use: consecutive}\n"), "8:14", "fleets[0].breaker.settings", "threshold is required for consecutive (it has no default)"},
	{"trigger without for", head + "triggers: [{kind: outage, at: 5s}]\n" + fleet, "4:12", "triggers[0]", "for is required (it has no default)"},
	{"capacity trigger without capacity", head + "triggers: [{kind: capacity, for: 5s}]\n" + fleet, "4:12", "triggers[0]", "capacity is required for kind: capacity"},
	{"exponential without base", withFleet("    retry: {backoff: {use: exponential}}\n"), "8:22", "fleets[0].retry.backoff.base", "is required by use: exponential (it has no default)"},
	{"decorrelated without cap", withFleet("    retry: {backoff: {base: 1s, jitter: decorrelated}}\n"), "8:22", "fleets[0].retry.backoff.cap", "is required by decorrelated jitter"},

	// Ranges.
	{"zero capacity", "duration: 60s\ntraffic: {rate: 10}\norigin: {model: queue, capacity: 0}\n" + fleet, "3:34", "origin.capacity", "must be in (0, 1000000000], got 0"},
	{"negative capacity", "duration: 60s\ntraffic: {rate: 10}\norigin: {model: capacity, capacity: -5}\n" + fleet, "3:37", "origin.capacity", "must be in (0, 1000000000], got -5"},
	{"zero rate", "duration: 60s\ntraffic: {rate: 0}\norigin: {model: capacity, capacity: 10}\n" + fleet, "2:17", "traffic.rate", "must be in (0, 1000000], got 0"},
	{"share above 1", "duration: 60s\ntraffic: {rate: 10, idempotent: 1.5}\norigin: {model: capacity, capacity: 10}\n" + fleet, "2:33", "traffic.idempotent", "must be in [0, 1], got 1.5"},
	{"zero duration", "duration: 0s\ntraffic: {rate: 10}\norigin: {model: capacity, capacity: 10}\n" + fleet, "1:11", "duration", "must be in (0s, 720h], got 0s"},
	{"budget_ratio above 1", head + "fleets:\n  - {name: a, timeout: 1s, budget: {use: token_bucket, settings: {budget_ratio: 1.5}}}\n", "5:81", "fleets[0].budget.settings.budget_ratio", "must be in (0, 1], got 1.5; it has no default"},
	{"budget_ratio zero", head + "fleets:\n  - {name: a, timeout: 1s, budget: {use: token_bucket, settings: {budget_ratio: 0}}}\n", "5:81", "fleets[0].budget.settings.budget_ratio", "must be in (0, 1], got 0; it has no default"},
	{"budget_ratio below precision", head + "fleets:\n  - {name: a, timeout: 1s, budget: {use: window, settings: {budget_ratio: 1e-9}}}\n", "5:75", "fleets[0].budget.settings.budget_ratio", "below the budget's precision"},
	{"min_tokens above max_tokens", head + "fleets:\n  - {name: a, timeout: 1s, budget: {use: token_bucket, settings: {budget_ratio: 0.1, min_tokens: 200}}}\n", "5:98", "fleets[0].budget.settings.min_tokens", "must be in [0, 100], got 200"},
	{"aws cost not whole", head + "fleets:\n  - {name: a, timeout: 1s, budget: {use: aws, settings: {retry_cost: 2.5}}}\n", "5:70", "fleets[0].budget.settings.retry_cost", "must be a whole number, got the number 2.5"},
	{"concurrency without min_retry_concurrency", head + "fleets:\n  - {name: a, timeout: 1s, budget: {use: concurrency, settings: {budget_percent: 20}}}\n", "5:65", "fleets[0].budget.settings", "min_retry_concurrency is required for concurrency"},
	{"concurrency percent above 100", head + "fleets:\n  - {name: a, timeout: 1s, budget: {use: concurrency, settings: {budget_percent: 120, min_retry_concurrency: 3}}}\n", "5:82", "fleets[0].budget.settings.budget_percent", "must be in [0, 100], got 120"},
	{"concurrency allows nothing", head + "fleets:\n  - {name: a, timeout: 1s, budget: {use: concurrency, settings: {budget_percent: 0, min_retry_concurrency: 0}}}\n", "5:82", "fleets[0].budget.settings.budget_percent", "both 0: the budget would allow no retry"},
	{"aws_adaptive beta 1", head + "fleets:\n  - {name: a, timeout: 1s, budget: {use: aws_adaptive, settings: {beta: 1}}}\n", "5:73", "fleets[0].budget.settings.beta", "must be in (0, 1), got 1"},
	{"budget_percent on aws_adaptive", head + "fleets:\n  - {name: a, timeout: 1s, budget: {use: aws_adaptive, settings: {budget_percent: 20}}}\n", "5:67", "fleets[0].budget.settings.budget_percent", "does not apply to aws_adaptive; it is a setting of concurrency"},
	{"retry on unknown", withFleet("    retry: {max_retries: 1, on: [timeout, eror]}\n"), "8:43", "fleets[0].retry.on[1]", "unknown value \"eror\""},
	{"retry on twice", withFleet("    retry: {max_retries: 1, on: [timeout, timeout]}\n"), "8:43", "fleets[0].retry.on[1]", "listed twice"},
	{"retry on empty", withFleet("    retry: {max_retries: 1, on: []}\n"), "8:33", "fleets[0].retry.on", "at least one"},
	{"aws cost above capacity", head + "fleets:\n  - {name: a, timeout: 1s, budget: {use: aws, settings: {capacity: 4}}}\n", "5:57", "fleets[0].budget.settings.retry_cost", "must be in [1, 4], got 5"},
	{"trigger for zero", head + "triggers: [{kind: outage, at: 5s, for: 0s}]\n" + fleet, "4:40", "triggers[0].for", "must be in (0s, 720h], got 0s"},
	{"trigger for negative", head + "triggers: [{kind: outage, for: -1s}]\n" + fleet, "4:32", "triggers[0].for", "must be in (0s, 720h], got -1s"},
	{"error trigger rate zero", head + "triggers: [{kind: errors, for: 5s, error_rate: 0}]\n" + fleet, "4:48", "triggers[0].error_rate", "must be in (0, 1], got 0"},
	{"negative timeout", head + "fleets:\n  - {name: a, timeout: -1s, budget: {use: none}}\n", "5:24", "fleets[0].timeout", "must be in (0s, 24h], got -1s"},
	{"max_retries too many", withFleet("    retry: {max_retries: 2000000}\n"), "8:26", "fleets[0].retry.max_retries", "must be in [0, 1000000], got 2000000"},
	{"cap below base", withFleet("    retry: {backoff: {use: fixed, base: 2s, cap: 1s}}\n"), "8:50", "fleets[0].retry.backoff.cap", "1s is below base (2s)"},
	{"factor jitter without factor", withFleet("    retry: {backoff: {use: fixed, base: 1s, jitter: factor}}\n"), "8:22", "fleets[0].retry.backoff.factor", "must be in (0, 1], got 0"},
	{"factor without factor jitter", withFleet("    retry: {backoff: {use: fixed, base: 1s, factor: 0.5}}\n"), "8:53", "fleets[0].retry.backoff.factor", "applies to factor jitter only"},
	{"jitter without a delay", withFleet("    retry: {backoff: {jitter: full}}\n"), "8:31", "fleets[0].retry.backoff.jitter", "full jitter spreads a delay, and schedule none has none"},
	{"base without a delay", withFleet("    retry: {backoff: {base: 1s}}\n"), "8:29", "fleets[0].retry.backoff.base", "does nothing with schedule none, which retries at once"},
	{"cap without a delay", withFleet("    retry: {backoff: {cap: 1s}}\n"), "8:28", "fleets[0].retry.backoff.cap", "does nothing with schedule none, which retries at once"},
	{"multiplier below 1", withFleet("    retry: {backoff: {use: exponential, base: 1s, multiplier: 0.5}}\n"), "8:63", "fleets[0].retry.backoff.multiplier", "must be in [1, 1000], got 0.5"},
	{"window breaker with no rate", withFleet("    breaker: {use: count_window, settings: {window_size: 20}}\n"), "8:44", "fleets[0].breaker.settings.failure_rate", "needs failure_rate or slow_call_rate"},
	{"slow_call_rate without slow_call", withFleet("    breaker: {use: time_window, settings: {window: 10s, slow_call_rate: 0.5}}\n"), "8:43", "fleets[0].breaker.settings.slow_call", "is required when slow_call_rate is set"},
	{"min_calls above window_size", withFleet("    breaker: {use: count_window, settings: {window_size: 5, min_calls: 6, failure_rate: 0.5}}\n"), "8:72", "fleets[0].breaker.settings.min_calls", "must be in [1, 5], got 6"},
	{"max_cooldown below cooldown", withFleet("    breaker: {use: consecutive, settings: {threshold: 3, cooldown: 10s, max_cooldown: 5s}}\n"), "8:87", "fleets[0].breaker.settings.max_cooldown", "must be 0s (the cooldown does not grow) or in [10s, 24h], got 5s"},
	{"hedge delay not below the timeout", withFleet("    hedge: {delay: 1s}\n"), "8:20", "fleets[0].hedge.delay", "1s is not shorter than the timeout (1s)"},
	{"hedge max without delay", withFleet("    hedge: {max: 2}\n"), "8:18", "fleets[0].hedge.max", "needs a delay"},
	{"empty fleet name", head + "fleets:\n  - {name: \"\", timeout: 1s, budget: {use: none}}\n", "5:12", "fleets[0].name", "must not be empty"},
	{"fleet name with a newline", head + "fleets:\n  - {name: \"a\\nb\", timeout: 1s, budget: {use: none}}\n", "5:12", "fleets[0].name", "must not hold control characters"},
	{"name with a right-to-left override", "name: \"naive\u202egol\"\n" + head + fleet, "1:7", "name", "must not hold invisible or direction-changing characters (U+202E)"},
	{"fleet name with a zero-width space", head + "fleets:\n  - {name: \"na\u200bive\", timeout: 1s, budget: {use: none}}\n", "5:12", "fleets[0].name", "must not hold invisible or direction-changing characters (U+200B)"},
	{"fleet name with a byte order mark", head + "fleets:\n  - {name: \"\ufeffa\", timeout: 1s, budget: {use: none}}\n", "5:12", "fleets[0].name", "(U+FEFF)"},
	{"fleet name with a line separator", head + "fleets:\n  - {name: \"a\u2028b\", timeout: 1s, budget: {use: none}}\n", "5:12", "fleets[0].name", "(U+2028)"},
	{"fleet name with a private-use character", head + "fleets:\n  - {name: \"a\ue000\", timeout: 1s, budget: {use: none}}\n", "5:12", "fleets[0].name", "(U+E000)"},

	// Rules across fields.
	{"tick longer than the duration", "duration: 60s\ntick: 2m\ntraffic: {rate: 10}\norigin: {model: capacity, capacity: 10}\n" + fleet, "2:7", "tick", "2m is longer than the duration (1m)"},
	{"duration not whole ticks", "duration: 60s\ntick: 7s\ntraffic: {rate: 10}\norigin: {model: capacity, capacity: 10}\n" + fleet, "1:11", "duration", "1m is not a whole number of ticks of 7s"},
	{"too many ticks", "duration: 1h\ntick: 1ms\ntraffic: {rate: 10}\norigin: {model: capacity, capacity: 10}\n" + fleet, "2:7", "tick", "1ms makes 3600000 ticks of the 1h run; at most 100000"},
	{"trigger past the end", head + "triggers:\n  - {kind: outage, at: 50s, for: 20s}\n" + fleet, "5:34", "triggers[0].for", "the trigger ends at 70s, after the end of the 1m run"},
	{"trigger starts after the end", head + "triggers:\n  - {kind: outage, at: 60s, for: 1s}\n" + fleet, "5:24", "triggers[0].at", "1m is not within the 1m run"},
	{"capacity trigger on the concurrency model", "duration: 60s\ntraffic: {rate: 10}\norigin: {model: concurrency, base: 1s}\ntriggers: [{kind: capacity, for: 1s, capacity: 3}]\n" + fleet, "4:19", "triggers[0].kind", "the concurrency model has none"},
	{"latency trigger on more replicas than exist", head + "triggers: [{kind: latency, for: 1s, factor: 3, replicas: 2}]\n" + fleet, "4:58", "triggers[0].replicas", "2 replicas, but the origin has 1"},
	{"fewer workers than replicas", "duration: 60s\ntraffic: {rate: 10}\norigin: {model: queue, capacity: 10, workers: 3, replicas: 5}\n" + fleet, "3:47", "origin.workers", "3 workers for 5 replicas: each replica needs at least one"},
	{"workers not shared equally", "duration: 60s\ntraffic: {rate: 10}\norigin: {model: queue, capacity: 10, workers: 12, replicas: 5}\n" + fleet, "3:47", "origin.workers", "12 workers cannot be shared equally by 5 replicas"},
	{"default workers for replicas", "duration: 60s\ntraffic: {rate: 10}\norigin: {model: queue, capacity: 10, replicas: 2}\n" + fleet, "3:9", "origin.workers", "1 workers for 2 replicas"},
	{"duplicate fleet names", head + "fleets:\n  - {name: a, timeout: 1s, budget: {use: none}}\n  - {name: a, timeout: 2s, budget: {use: none}}\n", "6:12", "fleets[1].name", `"a" is the name of fleets[0] too`},

	// Shedding, limits, the wait queue and the throttle.
	{"limit on the capacity model", "duration: 60s\ntraffic: {rate: 10}\norigin: {model: capacity, capacity: 10, limit: {use: aimd}}\n" + fleet, "3:41", "origin.limit", "limit does not apply to the capacity model; it is a setting of the queue model or the concurrency model"},
	{"unknown limit", queue("limit: {use: gradient2}") + fleet, "3:51", "origin.limit.use", `unknown value "gradient2"; did you mean "gradient"?`},
	{"fixed limit without its limit", queue("limit: {use: fixed}") + fleet, "3:45", "origin.limit.settings", "limit is required for fixed (it has no default)"},
	{"setting of another limit", queue("limit: {use: gradient, settings: {probe: 3}}") + fleet, "3:72", "origin.limit.settings.probe", "probe does not apply to gradient; it is a setting of vegas"},
	{"aimd backoff of 1", queue("limit: {use: aimd, settings: {backoff: 1}}") + fleet, "3:77", "origin.limit.settings.backoff", "must be in [0.1, 1), got 1"},
	{"initial limit above the max", queue("limit: {use: vegas, settings: {max_limit: 10}}") + fleet, "3:68", "origin.limit.settings.limit", "must be in [1, 10], got 20"},
	{"shed settings without deadline", queue("shed: {service_time: 50ms}") + fleet, "3:59", "origin.shed.service_time", "does nothing without deadline: true"},
	{"shed and drop_expired", queue("shed: {deadline: true}, drop_expired: true") + fleet, "3:76", "origin.drop_expired", "keep one"},
	{"shed reserve too long", queue("shed: {deadline: true, reserve: 2h}") + fleet, "3:70", "origin.shed.reserve", "must be in [0s, 1h], got 2h"},
	{"adaptive lifo without max_queue_time", queue("discipline: adaptive_lifo, queue_limit: 10") + fleet, "3:9", "origin.max_queue_time", "is required by discipline: adaptive_lifo"},
	{"max_queue_time without a queue limit", queue("max_queue_time: 100ms") + fleet, "3:9", "origin.queue_limit", "max_queue_time needs a bounded queue: set queue_limit"},
	{"unknown discipline", queue("discipline: adaptive") + fleet, "3:50", "origin.discipline", `unknown value "adaptive"`},
	{"unknown throttle", withFleet("    throttle: {use: adaptve}\n"), "8:21", "fleets[0].throttle.use", `did you mean "adaptive"?`},
	{"throttle k below 1", withFleet("    throttle: {use: adaptive, settings: {k: 0.5}}\n"), "8:45", "fleets[0].throttle.settings.k", "must be in [1, 1000], got 0.5"},
	{"throttle settings for use none", withFleet("    throttle: {use: none, settings: {k: 2}}\n"), "8:38", "fleets[0].throttle.settings.k", "does not apply: use: none takes no settings"},
	{"throttle max_probability zero", withFleet("    throttle: {use: adaptive, settings: {max_probability: 0}}\n"), "8:59", "fleets[0].throttle.settings.max_probability", "must not be 0: leave it out for the default, 1"},
}

// queue is a file's first three lines with a queue origin whose map ends
// with extra.
func queue(extra string) string {
	return "duration: 60s\ntraffic: {rate: 10}\norigin: {model: queue, capacity: 10, " + extra + "}\n"
}

func TestParseErrors(t *testing.T) {
	for _, tt := range parseErrorTests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse("t.yaml", []byte(tt.in))
			if s != nil {
				t.Errorf("Parse returned a scenario with the error %v", err)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse error = %#v, want an *Error", err)
			}
			if e.File != "t.yaml" {
				t.Errorf("File = %q, want t.yaml", e.File)
			}
			if at := position(e); at != tt.at {
				t.Errorf("at %q, want %q: %v", at, tt.at, e)
			}
			if e.Field != tt.field {
				t.Errorf("Field = %q, want %q: %v", e.Field, tt.field, e)
			}
			if !strings.Contains(e.Msg, tt.msg) {
				t.Errorf("Msg = %q, want it to contain %q", e.Msg, tt.msg)
			}
		})
	}
}

// position returns "line:col", "line" or "".
func position(e *Error) string {
	switch {
	case e.Line == 0:
		return ""
	case e.Column == 0:
		return strconv.Itoa(e.Line)
	}
	return strconv.Itoa(e.Line) + ":" + strconv.Itoa(e.Column)
}

func TestErrorString(t *testing.T) {
	for _, tt := range []struct {
		e    Error
		want string
	}{
		{Error{File: "storm.yaml", Line: 14, Column: 5, Field: "fleets[1].budget.settings", Msg: "budget_ratio is required for token_bucket (it has no default)"},
			"storm.yaml:14:5: fleets[1].budget.settings: budget_ratio is required for token_bucket (it has no default)"},
		{Error{File: "s.yaml", Line: 3, Msg: "invalid YAML: x"}, "s.yaml:3: invalid YAML: x"},
		{Error{File: "s.yaml", Msg: "the file is empty"}, "s.yaml: the file is empty"},
		{Error{Field: "fleets[0].timeout", Msg: "must be in (0s, 24h], got 0s"}, "scenario: fleets[0].timeout: must be in (0s, 24h], got 0s"},
		// A file name with control or invisible characters is quoted, so
		// that it cannot reach the terminal raw; a plain one is not.
		{Error{File: "\x1b[41mEVIL\x1b[0m.yaml", Msg: "the file is empty"}, `"\x1b[41mEVIL\x1b[0m.yaml": the file is empty`},
		{Error{File: "a\u202eb.yaml", Line: 2, Msg: "x"}, `"a\u202eb.yaml":2: x`},
		{Error{File: "tempête é.yaml", Msg: "x"}, "tempête é.yaml: x"},
		{Error{File: "s.yaml", Field: "fleets[0].\x1b[31m", Msg: "unknown key \"\x1b[31m\""}, `s.yaml: fleets[0].\x1b[31m: unknown key "\x1b[31m"`},
	} {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

// storm is testdata/storm.yaml, DESIGN.md's example with every key
// written out.
var storm = Scenario{
	Name: "storm", Seed: 1, Duration: 120 * time.Second, Tick: time.Second,
	Traffic: Traffic{Rate: 100, Arrivals: "constant", Clients: 200, Idempotent: 1},
	Origin: Origin{
		Model: ModelQueue, Capacity: 120, Workers: 12, Discipline: "fifo", Replicas: 1,
		Limit: Limit{Use: LimitNone},
	},
	Triggers: []Trigger{{Kind: TriggerCapacity, At: 30 * time.Second, For: 10 * time.Second, Capacity: 40}},
	Fleets: []Fleet{
		{
			Name: "naive", Timeout: time.Second,
			Retry: Retry{MaxRetries: 3, Backoff: Backoff{
				Use: "exponential", Base: 100 * time.Millisecond, Cap: 10 * time.Second, Multiplier: 2, Jitter: "none",
			}},
			Budget:   Budget{Use: BudgetNone},
			Breaker:  Breaker{Use: BreakerNone},
			Throttle: Throttle{Use: ThrottleNone},
		},
		{
			Name: "guarded", Timeout: time.Second,
			Retry: Retry{MaxRetries: 3, IdempotentOnly: true, Backoff: Backoff{
				Use: "exponential", Base: 100 * time.Millisecond, Cap: 10 * time.Second, Multiplier: 2, Jitter: "full",
			}},
			Budget: Budget{Use: BudgetTokenBucket, TokenBucket: budget.TokenBucketSettings{
				Ratio: 0.1, Funding: budget.FundedBySuccess,
				MinTokens: 10, MaxTokens: 100, RetryCost: 1, TimeoutCost: 1,
			}},
			Breaker: Breaker{
				Use: BreakerConsecutive, Threshold: 5, Cooldown: 5 * time.Second, Probes: 1, Scope: "all",
			},
			Throttle: Throttle{Use: ThrottleNone},
		},
	},
}

func TestLoadStorm(t *testing.T) {
	s, err := Load(filepath.Join("testdata", "storm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*s, storm) {
		t.Errorf("Load(storm.yaml) =\n%+v\nwant\n%+v", *s, storm)
	}
}

// TestDefaults reads the smallest file of each kind and checks every
// default the loader fills in.
func TestDefaults(t *testing.T) {
	in := `duration: 60s
traffic: {rate: 10}
origin: {model: capacity, capacity: 10}
fleets:
  - name: a
    timeout: 1s
    budget: {use: token_bucket, settings: {budget_ratio: 0.2}}
    breaker: {use: count_window, settings: {window_size: 5, failure_rate: 0.5}}
    hedge: {delay: 100ms}
  - name: b
    timeout: 1s
    retry: {backoff: {use: exponential, base: 10ms}}
    budget: {use: window, settings: {budget_ratio: 0.1, retry_cost: 2}}
    breaker: {use: time_window, settings: {window: 10s, failure_rate: 0.5}}
  - name: c
    timeout: 1s
    budget: {use: aws}
`
	s, err := Parse("my-storm.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := &Scenario{
		Name: "my-storm", Seed: 1, Duration: time.Minute, Tick: time.Second,
		Traffic: Traffic{Rate: 10, Arrivals: "constant", Clients: 1, Idempotent: 1},
		Origin:  Origin{Model: ModelCapacity, Capacity: 10, Latency: 10 * time.Millisecond, Replicas: 1},
		Fleets: []Fleet{
			{
				Name: "a", Timeout: time.Second,
				Retry:  Retry{Backoff: Backoff{Use: "none", Jitter: "none"}},
				Budget: Budget{Use: BudgetTokenBucket, TokenBucket: budget.TokenBucketSettings{Ratio: 0.2, Funding: budget.FundedBySuccess, MaxTokens: 100, RetryCost: 1, TimeoutCost: 1}},
				Breaker: Breaker{
					Use: BreakerCountWindow, WindowSize: 5, MinCalls: 5, FailureRate: 0.5,
					Cooldown: 5 * time.Second, Probes: 1, Scope: "all",
				},
				Throttle: Throttle{Use: ThrottleNone},
				Hedge:    Hedge{Delay: 100 * time.Millisecond, Max: 1},
			},
			{
				Name: "b", Timeout: time.Second,
				Retry:  Retry{Backoff: Backoff{Use: "exponential", Base: 10 * time.Millisecond, Multiplier: 2, Jitter: "none"}},
				Budget: Budget{Use: BudgetWindow, Window: budget.WindowSettings{Ratio: 0.1, Funding: budget.FundedBySuccess, RetryCost: 2, TimeoutCost: 2, TTL: 10 * time.Second}},
				Breaker: Breaker{
					Use: BreakerTimeWindow, WindowPeriod: 10 * time.Second, MinCalls: 10, FailureRate: 0.5,
					Cooldown: 5 * time.Second, Probes: 1, Scope: "all",
				},
				Throttle: Throttle{Use: ThrottleNone},
			},
			{
				Name: "c", Timeout: time.Second,
				Retry:    Retry{Backoff: Backoff{Use: "none", Jitter: "none"}},
				Budget:   Budget{Use: BudgetAWS, AWS: budget.AWSQuotaSettings{Capacity: 500, RetryCost: 5, TimeoutCost: 10, NoRetryIncrement: 1}},
				Breaker:  Breaker{Use: BreakerNone},
				Throttle: Throttle{Use: ThrottleNone},
			},
		},
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("got\n%+v\nwant\n%+v", s, want)
	}

	queue, err := Parse("q.yaml", []byte("duration: 60s\ntraffic: {rate: 10}\norigin: {model: queue, capacity: 10}\n"+fleet))
	if err != nil {
		t.Fatal(err)
	}
	if o := queue.Origin; o.Workers != 1 || o.Discipline != "fifo" || o.Replicas != 1 || o.Latency != 0 {
		t.Errorf("queue origin = %+v, want 1 worker, fifo, 1 replica and no latency", o)
	}
}

func TestParseAccepts(t *testing.T) {
	for _, tt := range []struct{ name, in string }{
		{"aliases", head + "fleets:\n  - {name: a, timeout: 1s, budget: &none {use: none}, retry: &r {max_retries: 2}}\n  - {name: b, timeout: 1s, budget: *none, retry: *r}\n"},
		{"unlimited retries", withFleet("    retry: {max_retries: unlimited}\n")},
		{"zero as a duration", withFleet("    deadline: 0\n")},
		{"explicit zeros the example writes", withFleet("    retry: {backoff: {use: exponential, base: 1s, multiplier: 2, jitter: none, factor: 0}}\n    hedge: {delay: 0s, max: 0}\n")},
		{"decorrelated jitter without a schedule", withFleet("    retry: {backoff: {base: 100ms, cap: 1s, jitter: decorrelated}}\n")},
		{"every trigger kind", head + `triggers:
  - {kind: capacity, at: 1s, for: 1s, capacity: 0}
  - {kind: errors, at: 2s, for: 1s, error_rate: 1}
  - {kind: outage, at: 3s, for: 1s}
  - {kind: load, at: 4s, for: 1s, rate: 0}
  - {kind: latency, at: 5s, for: 55s, factor: 10}
` + fleet},
		{"concurrency model", "duration: 60s\ntraffic: {rate: 10}\norigin: {model: concurrency, base: 1s, per_inflight: 10ms}\n" + fleet},
		{"a large seed", "seed: 18446744073709551615\n" + head + fleet},
		{"hex and underscores", "duration: 60s\ntraffic: {rate: 1_000, clients: 0x10}\norigin: {model: capacity, capacity: 2_000}\n" + fleet},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse("t.yaml", []byte(tt.in)); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load error = %v, want an *Error wrapping fs.ErrNotExist", err)
	}
	if !strings.HasSuffix(e.Error(), "nope.yaml: cannot read the file: no such file or directory") {
		t.Errorf("Error() = %q", e.Error())
	}
}

func TestLoadDefaultName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "blip.yaml")
	if err := os.WriteFile(path, []byte(head+fleet), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "blip" {
		t.Errorf("Name = %q, want the file's base name, blip", s.Name)
	}
}

func TestDefaultName(t *testing.T) {
	for file, want := range map[string]string{
		"storm.yaml":             "storm",
		"dir/blip.v2.yml":        "blip.v2",
		"":                       "scenario",
		"-":                      "-",
		".yaml":                  "scenario",
		"/":                      "scenario",
		"bad\nname.yaml":         "scenario",
		strings.Repeat("x", 200): "scenario",
	} {
		if got := defaultName(file); got != want {
			t.Errorf("defaultName(%q) = %q, want %q", file, got, want)
		}
	}
}

// Load reads at most the size limit and a byte, whatever the file: a pipe
// that never ends is refused once it has sent too much, and a file whose
// size is known is refused before any of it is read.
func TestLoadReadsAtMostTheLimit(t *testing.T) {
	dir := t.TempDir()
	sparse := filepath.Join(dir, "sparse.yaml")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil { // sparse: costs nothing to make
		t.Skipf("cannot make a sparse file here: %v", err)
	}
	f.Close()
	_, err = Load(sparse)
	if err == nil || !strings.Contains(err.Error(), "too large (67108864 bytes; at most 1048576)") {
		t.Errorf("Load(64 MiB file) = %v", err)
	}

	_, err = Load(dir)
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(e.Msg, "is a directory") {
		t.Errorf("Load(directory) = %v, want an *Error saying it is a directory", err)
	}
}
