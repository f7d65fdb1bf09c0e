package importer

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/retrystorm/retrystorm/resil/resilgrpc/grpcconfig"
	"github.com/retrystorm/retrystorm/scenario"
)

// The two ways an edit can fail after it is written. Both are errors, never
// notes: an edit the product refuses, or one it reads otherwise than the
// recommendation says, must not reach a user's repository.
var (
	// ErrNotAccepted: the product's own parser or validation refuses an
	// edited file that it accepted before the edit.
	ErrNotAccepted = errors.New("the product refuses the edited file")
	// ErrReadBack: imported again, the edited files do not read as the
	// recommendation in what the format writes.
	ErrReadBack = errors.New("the edited files do not read back as the recommendation")
)

// ValidateEdited checks each edited file of format with the product's own
// parser and validation, where a Go one stands alone: Envoy's protobuf
// messages (go-control-plane v1.40.0) read strictly and their Validate
// methods (the PGV rules of Envoy's API); grpc-go's own service config
// parser (google.golang.org/grpc v1.85.0: grpc.NewClient parses
// WithDefaultServiceConfig and refuses what its parser refuses, without
// dialling); Istio's messages (istio.io/api v1.32.0) read strictly, with
// Istio's validation of the retry and traffic policy fields written out
// (validateistio.go). Linkerd, the AWS SDKs, nginx and HAProxy have no Go
// parser among the module's dependencies: the importer's own strict
// readers stand in (nginx's and HAProxy's are checked against the real
// binaries' config tests in the importer's tests). A
// file that the product refused before the edit (a fragment without a
// field Validate wants) is judged on what the edit added: only an error
// the original does not have is one. The error wraps ErrNotAccepted.
func ValidateEdited(format Format, edited []Edited) error {
	for _, e := range edited {
		after := productErrors(format, e.Name, e.After)
		if len(after) == 0 {
			continue
		}
		var before []string
		if e.Before != nil {
			before = productErrors(format, e.Name, e.Before)
		}
		for _, a := range after {
			if !slices.Contains(before, a) {
				return fmt.Errorf("importer: %s: %w: %s", e.Name, ErrNotAccepted, a)
			}
		}
	}
	return nil
}

// productErrors lists what the product's parser says of one file.
func productErrors(format Format, name string, data []byte) []string {
	var errs []string
	add := func(err error) {
		if err != nil {
			errs = append(errs, strings.TrimPrefix(err.Error(), name+": "))
		}
	}
	switch format {
	case Envoy:
		errs = envoyErrors(name, data)
	case Istio:
		errs = istioErrors(name, data)
	case GRPC:
		add(grpcAccepts(data))
		_, err := grpcconfig.Parse(data, grpcconfig.Options{})
		add(err)
	case Linkerd:
		_, err := importLinkerd([]Source{{Name: name, Data: data}})
		add(err)
	case AWS:
		_, err := parseAWS(name, data)
		add(err)
	case NGINX:
		// nginx's own parser and the directives' checks, as the importer
		// reads them (nginxconf.go): no light Go parser of nginx's exists;
		// the tests run the real nginx -t on every candidate.
		_, err := importNginx([]Source{{Name: name, Data: data}}, Options{})
		add(err)
	case HAProxy:
		_, err := importHAProxy([]Source{{Name: name, Data: data}}, Options{})
		add(err)
	default:
		add(fmt.Errorf("no parser for format %q", format))
	}
	return errs
}

// envoyErrors reads the route configurations and clusters of an Envoy
// file strictly, and runs go-control-plane's Validate on each.
func envoyErrors(name string, data []byte) []string {
	docs, err := documents(name, data)
	if err != nil {
		return []string{err.Error()}
	}
	var cfg envoyConfig
	for _, d := range docs {
		if err := cfg.find(name, d, ""); err != nil {
			return []string{err.Error()}
		}
	}
	var out []string
	check := func(where string, m interface{ Validate() error }) {
		if err := m.Validate(); err != nil {
			out = append(out, fmt.Sprintf("%s: %v (go-control-plane's Validate)", cmpOr(where, "(top)"), err))
		}
	}
	for _, rc := range cfg.routes {
		check(rc.path, rc.msg)
	}
	for _, cl := range cfg.clusters {
		check(cl.path, cl.msg)
	}
	return out
}

// grpcAccepts hands a service config to grpc-go's own parser, as a
// channel's default service config: grpc.NewClient parses it and fails
// on what grpc-go refuses (service_config.go, parseServiceConfig); the
// channel never connects (NewClient dials lazily) and is closed at once.
func grpcAccepts(data []byte) error {
	cc, err := grpc.NewClient("passthrough:///retrystorm-validate", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(string(data)))
	if err != nil {
		return fmt.Errorf("grpc-go: %v", err)
	}
	return cc.Close()
}

// checkEdit validates the edited files with the product's parser, then
// imports them again (with the sources they did not change) and requires
// that the fleet at origin, or at the new file, reads as want in what the
// format writes.
func checkEdit(srcs []Source, edited []Edited, from Fleet, want scenario.Fleet, o Options) (Fleet, error) {
	if err := ValidateEdited(from.Format, edited); err != nil {
		return Fleet{}, err
	}
	got, err := importEdited(srcs, edited, from, o)
	if err != nil {
		return Fleet{}, err
	}
	if d := Differences(got.Fleet, want, from.Format); len(d) > 0 {
		return Fleet{}, fmt.Errorf("importer: %s: %w: %s", from.Origin, ErrReadBack, strings.Join(d, "; "))
	}
	return got, nil
}

// importEdited imports the sources with the edits made (new files after
// them) and returns the fleet the edit was made for: the one at from's
// origin, or the first read from a new file when the edit wrote one.
func importEdited(srcs []Source, edited []Edited, from Fleet, o Options) (Fleet, error) {
	again := slices.Clone(srcs)
	var added []string
	for _, e := range edited {
		i := slices.IndexFunc(again, func(s Source) bool { return s.Name == e.Name })
		if i < 0 {
			again = append(again, Source{Name: e.Name, Data: e.After})
			added = append(added, e.Name)
			continue
		}
		again[i].Data = e.After
	}
	o.Format = from.Format
	fl, err := Import(again, o)
	if err != nil {
		return Fleet{}, fmt.Errorf("importer: %w: the edited files do not import again: %v", ErrReadBack, err)
	}
	for _, f := range fl {
		if f.Origin == from.Origin || slices.Contains(f.Covers, from.Origin) {
			return f, nil
		}
	}
	for _, f := range fl {
		for _, a := range added {
			if strings.HasPrefix(f.Origin, a+": ") {
				return f, nil
			}
		}
	}
	return Fleet{}, fmt.Errorf("importer: %w: the edited files no longer hold %s", ErrReadBack, from.Origin)
}

// asWritten is rec as the edit writes it into format's files: the retry
// count the format can hold (gRPC's cap of 4 retries; a count in place of
// unlimited, as the edit notes), and the user's budget kept where the
// format cannot write rec's (or rec has none and the user has a limit,
// which an edit never removes).
func asWritten(from Fleet, rec scenario.Fleet) scenario.Fleet {
	format, user := from.Format, from.Fleet
	if n, unlimited := retries(rec); unlimited || (format == GRPC && n > 4) {
		rec.Retry.MaxRetries = map[Format]int{Envoy: 10, Istio: 10, GRPC: 4, AWS: 9, Linkerd: -1}[format]
	}
	if rec.Retry.MaxRetries == 0 {
		return rec
	}
	if format == Linkerd || format == AWS {
		// Neither has a setting for what is retried; a ServiceProfile's
		// route retries without a count, bounded by its budget.
		rec.Retry.On = user.Retry.On
		if format == Linkerd && strings.Contains(from.Origin, ": ServiceProfile ") {
			rec.Retry.MaxRetries = -1
		}
	}
	none := rec.Budget.Use == "" || rec.Budget.Use == scenario.BudgetNone
	if (none && user.Budget.Use != "" && user.Budget.Use != scenario.BudgetNone) || (!none && !writesBudget(format, rec.Budget.Use)) {
		rec.Budget = user.Budget
	}
	return rec
}

// writesBudget reports whether format has a setting for budgets of kind
// use.
func writesBudget(format Format, use string) bool {
	switch format {
	case Envoy, Istio:
		return use == scenario.BudgetConcurrency
	case Linkerd:
		return use == scenario.BudgetWindow
	case GRPC:
		return use == scenario.BudgetGRPC
	case AWS:
		return use == scenario.BudgetAWS || use == scenario.BudgetAWSAdaptive
	}
	return false
}
