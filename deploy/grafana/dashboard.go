// Package grafana builds retrystorm's Grafana dashboard, as code, for the
// metrics resil's exporters register: resilprom (resil_*, a label name per
// Guard or Shedder) and resilotel through OpenTelemetry's Prometheus exporter (the
// same names; a label resil_guard_name, and retries and hedges as attempts
// of a kind). `go generate` writes it to retrystorm.json beside this file;
// a test regenerates it and compares, checks that every query parses as
// PromQL and that it names only metrics the exporters register.
//
// Nothing in the retrystorm binaries imports this package: the Grafana SDK
// stays out of their builds.
package grafana

//go:generate go run ./gen retrystorm.json

import (
	"encoding/json"
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// UID is the dashboard's uid: imported twice, it replaces itself.
const UID = "retrystorm-resil"

// sel is the selector every query filters by: the job and the guards
// chosen above the dashboard. resilprom names a guard by the label name,
// resilotel by resil_guard_name; a guard exported one way lacks the other
// label, which =~ ".*" matches. A server's Shedders are chosen apart
// (resilprom: name; resilotel: resil_shedder_name), since a service's
// guards and its shedder are different things with different names.
const (
	sel         = `job=~"$job", name=~"$guard"`
	selOTel     = `job=~"$job", resil_guard_name=~"$guard"`
	selShed     = `job=~"$job", name=~"$shedder"`
	selShedOTel = `job=~"$job", resil_shedder_name=~"$shedder"`
)

// query is one line of a panel.
type query struct {
	expr, legend string
}

// panel is one chart: what it shows, in which unit, and its lines.
type panel struct {
	title, about, unit string
	queries            []query
	// lines are thresholds drawn across the chart: value and color.
	lines []line
	min   *float64
}

type line struct {
	at    float64
	color string
}

func zero() *float64 { z := 0.0; return &z }

// rows are the dashboard: the storm's early warning first, then what the
// defences did, then latency.
var rows = []struct {
	title  string
	panels []panel
}{
	{"The retry storm's early warning", []panel{
		{
			title: "Retries per request, against the budget ratio",
			about: "Retries sent over guarded calls started, per job. A token bucket of ratio r holds it near r (plus its floor); 0.2 is the RetriesPerRequestHigh alert, 1 the RetryStorm alert (deploy/prometheus/retrystorm-rules.yml). The naive storm sits above 2.",
			unit:  "none", min: zero(),
			queries: []query{
				{`sum by (job) (rate(resil_retries_total{` + sel + `}[$__rate_interval])) / sum by (job) (rate(resil_intents_total{` + sel + `}[$__rate_interval]))`, "{{job}}"},
				{`sum by (job) (rate(resil_attempts_total{` + selOTel + `, resil_attempt_kind="retry"}[$__rate_interval])) / sum by (job) (rate(resil_intents_total{` + selOTel + `}[$__rate_interval]))`, "{{job}} (OpenTelemetry)"},
			},
			lines: []line{{0.1, "green"}, {0.2, "orange"}, {1, "red"}},
		},
		{
			title: "Attempts by kind, and intents",
			about: "Attempts sent per second: first attempts, retries, hedges; beside the guarded calls (intents) they serve. The gap between attempts and intents is the load the retries add.",
			unit:  "reqps", min: zero(),
			queries: []query{
				{`sum by (kind) (rate(resil_attempt_duration_seconds_count{` + sel + `}[$__rate_interval]))`, "{{kind}}"},
				{`sum by (resil_attempt_kind) (rate(resil_attempts_total{` + selOTel + `, resil_attempt_kind!=""}[$__rate_interval]))`, "{{resil_attempt_kind}} (OpenTelemetry)"},
				{`sum(rate(resil_intents_total{` + sel + `}[$__rate_interval]))`, "intents"},
			},
		},
		{
			title: "Calls that failed",
			about: "Guarded calls that ended with an error, as a share of those started.",
			unit:  "percentunit", min: zero(),
			queries: []query{
				{`sum by (job) (rate(resil_failures_total{` + sel + `}[$__rate_interval])) / sum by (job) (rate(resil_intents_total{` + sel + `}[$__rate_interval]))`, "{{job}}"},
			},
		},
	}},
	{"What the defences did", []panel{
		{
			title: "Retry budget balance",
			about: "Tokens left in the guards' retry budgets, in retries of unit cost: the lowest guard and the mean. At zero, retries are refused (budget denials).",
			unit:  "none", min: zero(),
			queries: []query{
				{`min by (job) (resil_budget_tokens{` + sel + `})`, "{{job}} lowest"},
				{`avg by (job) (resil_budget_tokens{` + sel + `})`, "{{job}} mean"},
			},
		},
		{
			title: "Refused: budget denials, breaker refusals, fallbacks",
			about: "Per second: retries and hedges the budget refused, attempts an open breaker refused, and refused calls a fallback answered.",
			unit:  "reqps", min: zero(),
			queries: []query{
				{`sum(rate(resil_budget_denials_total{` + sel + `}[$__rate_interval]))`, "budget denials"},
				{`sum(rate(resil_breaker_refusals_total{` + sel + `}[$__rate_interval]))`, "breaker refusals"},
				{`sum(rate(resil_fallbacks_total{` + sel + `}[$__rate_interval]))`, "fallbacks"},
			},
		},
		{
			title: "Throttled: the adaptive throttle",
			about: "Attempts the client-side adaptive throttle refused locally, per second, and its refusal probability now (the mean over the guards): it sheds only the excess, where a breaker sheds everything.",
			unit:  "short", min: zero(),
			queries: []query{
				{`sum(rate(resil_throttle_refusals_total{` + sel + `}[$__rate_interval]))`, "throttled per second"},
				{`avg by (job) (resil_throttle_probability{` + sel + `})`, "{{job}} refusal probability"},
			},
		},
		{
			title: "Shed: the server's admission",
			about: "Per second, at a server that admits with a resil.Shedder (resilprom.RegisterShedder, or resilotel.InstrumentShedder): requests admitted, refused before their work by reason (deadline, limit, queue full, queue timeout), and dropped when their deadline passed as they ran.",
			unit:  "reqps", min: zero(),
			queries: []query{
				{`sum(rate(resil_shed_admitted_total{` + selShed + `}[$__rate_interval]))`, "admitted"},
				{`sum by (reason) (rate(resil_shed_refused_total{` + selShed + `, reason!=""}[$__rate_interval]))`, "refused: {{reason}}"},
				{`sum by (resil_shed_reason) (rate(resil_shed_refused_total{` + selShedOTel + `, resil_shed_reason!=""}[$__rate_interval]))`, "refused: {{resil_shed_reason}} (OpenTelemetry)"},
				{`sum(rate(resil_shed_dropped_total{` + selShed + `}[$__rate_interval]))`, "dropped"},
			},
		},
		{
			title: "Concurrency limit and what waits",
			about: "The server's concurrency limit now (fixed, or learnt from latency), the requests in flight under it and those waiting for a slot.",
			unit:  "short", min: zero(),
			queries: []query{
				{`sum by (job) (resil_concurrency_limit{` + selShed + `})`, "{{job}} limit"},
				{`sum by (job) (resil_shed_inflight{` + selShed + `})`, "{{job}} in flight"},
				{`sum by (job) (resil_shed_queued{` + selShed + `})`, "{{job}} waiting"},
			},
		},
		{
			title: "Breakers open",
			about: "Guards whose circuit breaker is open (refusing every call) or half-open (letting probes through).",
			unit:  "none", min: zero(),
			queries: []query{
				{`sum by (job) (resil_breaker_state{` + sel + `} == bool 1)`, "{{job}} open"},
				{`sum by (job) (resil_breaker_state{` + sel + `} == bool 2)`, "{{job}} half-open"},
			},
		},
	}},
	{"Latency", []panel{
		{
			title: "Attempt latency",
			about: "The median and 99th percentile of attempt durations, from resilprom's histogram (resil_attempt_duration_seconds), by outcome.",
			unit:  "s", min: zero(),
			queries: []query{
				{`histogram_quantile(0.5, sum by (le, outcome) (rate(resil_attempt_duration_seconds_bucket{` + sel + `}[$__rate_interval])))`, "p50 {{outcome}}"},
				{`histogram_quantile(0.99, sum by (le, outcome) (rate(resil_attempt_duration_seconds_bucket{` + sel + `}[$__rate_interval])))`, "p99 {{outcome}}"},
			},
		},
	}},
}

// Queries returns every query of the dashboard, in order.
func Queries() []string {
	var out []string
	for _, r := range rows {
		for _, p := range r.panels {
			for _, q := range p.queries {
				out = append(out, q.expr)
			}
		}
	}
	return out
}

// Build returns the dashboard.
func Build() (dashboard.Dashboard, error) {
	ds := common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}
	b := dashboard.NewDashboardBuilder("retrystorm: retries, budgets and breakers").
		Uid(UID).
		Description("The signals of resil's Guards and Shedders, as resilprom and resilotel export them: retries per request against the budget ratio, attempts by kind, budget balance and denials, throttling, shedding and the concurrency limit, breakers, latency. Built by deploy/grafana (go generate).").
		Tags([]string{"retrystorm", "resil"}).
		Editable().
		Refresh("10s").
		Time("now-30m", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Prometheus").Type("prometheus")).
		WithVariable(dashboard.NewQueryVariableBuilder("job").Label("job").
			Datasource(ds).
			Query(dashboard.StringOrMap{String: cog.ToPtr("label_values(resil_intents_total, job)")}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Multi(true).IncludeAll(true).AllValue(".*")).
		WithVariable(dashboard.NewQueryVariableBuilder("guard").Label("guard").
			Datasource(ds).
			Query(dashboard.StringOrMap{String: cog.ToPtr(`label_values(resil_intents_total{job=~"$job"}, name)`)}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Multi(true).IncludeAll(true).AllValue(".*")).
		WithVariable(dashboard.NewQueryVariableBuilder("shedder").Label("shedder").
			Datasource(ds).
			Query(dashboard.StringOrMap{String: cog.ToPtr(`label_values(resil_shed_admitted_total{job=~"$job"}, name)`)}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Multi(true).IncludeAll(true).AllValue(".*"))
	for _, r := range rows {
		b = b.WithRow(dashboard.NewRowBuilder(r.title))
		for _, p := range r.panels {
			b = b.WithPanel(chart(p, ds))
		}
	}
	return b.Build()
}

// chart is one time-series panel.
func chart(p panel, ds common.DataSourceRef) *timeseries.PanelBuilder {
	c := timeseries.NewPanelBuilder().
		Title(p.title).
		Description(p.about).
		Unit(p.unit).
		Datasource(ds).
		Height(8).Span(8).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom))
	if p.min != nil {
		c = c.Min(*p.min)
	}
	if len(p.lines) > 0 {
		steps := []dashboard.Threshold{{Value: nil, Color: "transparent"}}
		for _, l := range p.lines {
			steps = append(steps, dashboard.Threshold{Value: cog.ToPtr(l.at), Color: l.color})
		}
		c = c.Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(steps)).
			ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeDashed))
	}
	for i, q := range p.queries {
		c = c.WithTarget(prometheus.NewDataqueryBuilder().
			RefId(string(rune('A' + i))).
			Datasource(ds).
			Expr(q.expr).
			LegendFormat(q.legend).
			Range())
	}
	return c
}

// JSON returns the dashboard as Grafana imports it, indented, with a final
// newline.
func JSON() ([]byte, error) {
	d, err := Build()
	if err != nil {
		return nil, fmt.Errorf("grafana: %w", err)
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("grafana: %w", err)
	}
	return append(b, '\n'), nil
}
