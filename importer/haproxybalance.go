package importer

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/retrystorm/retrystorm/resil/outlier"
	"github.com/retrystorm/retrystorm/scenario"
)

// balance maps a backend's balance and its servers' observe, error-limit
// and on-error, and returns its servers not backup or disabled (the
// replicas).
func (px *hapProxy) balance(p *prov, f *scenario.Fleet) (int, error) {
	primary := 0
	var backups []string
	for _, s := range px.servers {
		_, b := s.params["backup"]
		_, d := s.params["disabled"]
		switch {
		case b:
			backups = append(backups, s.name)
		case !d:
			primary++
		}
	}
	p.set("origin.replicas", strconv.Itoa(primary), px.sec.Kind+" "+px.sec.Name).atLine(px.sec.Line, lineAfter).by(afterColon, "its servers not backup or disabled")
	if len(backups) > 0 {
		p.lose("backup servers (%s): HAProxy sends to them only once every other is down; the simulator's replicas are all primary", strings.Join(backups, ", "))
	}
	if primary < 2 {
		return primary, nil
	}
	use := scenario.BalancerRoundRobin
	if st, ok := px.settings["balance"]; !ok {
		p.dflt("balancer.use", use, "balance", "HAProxy's default, roundrobin")
	} else {
		algo := strings.Join(st.Words, " ")
		switch {
		case algo == "roundrobin" || algo == "static-rr":
		case algo == "leastconn":
			use = scenario.BalancerLeastRequest
		case algo == "random" || algo == "random(2)":
			use = scenario.BalancerP2C // two draws, the less loaded: HAProxy's default
		case algo == "random(1)":
			use = scenario.BalancerRandom
		default:
			p.lose("balance %s: not modelled; the fleet picks round robin", algo)
		}
		p.took("balancer.use", use, st.at())
	}
	f.Balancer = scenario.Balancer{Use: use}
	p.note("balancer.settings.panic_threshold", "0", "HAProxy has no panic mode: with every server down it answers 503")
	return primary, px.observe(p, f)
}

// observe maps the first server's health observing (the simulator has one
// detector setting): with check and observe, error-limit consecutive
// errors (layer7: a status outside 100-499, 501 and 505, a timeout, a
// failed connection; layer4: a failed connection) take the server out
// until rise checks pass, inter apart, for on-error mark-down; fail-check
// and sudden-death need failed checks too, which a failing server's checks
// are taken to be; fastinter only checks more often.
func (px *hapProxy) observe(p *prov, f *scenario.Fleet) error {
	s := px.servers[0]
	mode, ok := s.params["observe"]
	_, check := s.params["check"]
	if !ok {
		return nil
	}
	at := fmt.Sprintf("server %s (line %d)", s.name, s.line)
	if !check {
		p.lose("%s: observe without check does nothing (HAProxy needs health checks for it)", at)
		return nil
	}
	num := func(k string, dflt int) (int, error) {
		v, ok := s.params[k]
		if !ok {
			return dflt, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("%s:%d: server %s: %s %q: want a whole number above 0 (HAProxy refuses it)", px.file, s.line, s.name, k, v)
		}
		return n, nil
	}
	limit, err := num("error-limit", hapErrorLimit)
	if err != nil {
		return err
	}
	rise, err := num("rise", hapRise)
	if err != nil {
		return err
	}
	inter := hapInter
	if v, ok := s.params["inter"]; ok {
		if inter, err = hapTime(v); err != nil {
			return fmt.Errorf("%s:%d: server %s: inter: %v (HAProxy refuses it)", px.file, s.line, s.name, err)
		}
	}
	action := s.params["on-error"]
	switch action {
	case "":
		action = "fail-check"
	case "fastinter":
		p.lose("%s: on-error fastinter only checks more often: no server is taken out by the errors alone", at)
		return nil
	case "fail-check", "sudden-death", "mark-down":
	default:
		return fmt.Errorf("%s:%d: server %s: on-error %q: want fastinter, fail-check, sudden-death or mark-down (HAProxy refuses it)", px.file, s.line, s.name, action)
	}
	if action != "mark-down" {
		p.lose("%s: on-error %s needs failed health checks to mark the server down, which a failing server's checks are taken to give at once", at, action)
	}
	back := max(time.Duration(rise)*inter, time.Millisecond)
	var st outlier.Settings
	switch mode {
	case "layer7":
		st = inARow(limit, back, false)
	case "layer4":
		st = inARow(limit, back, true)
	default:
		return fmt.Errorf("%s:%d: server %s: observe %q: want layer4 or layer7 (HAProxy refuses it)", px.file, s.line, s.name, mode)
	}
	p.set("outlier_detection.settings", fmt.Sprintf("%d errors in a row eject for %s (%s)", limit, fmtDur(back), mode), "server "+s.name).atLine(s.line, lineAfter).by(afterColon, "observe, error-limit, on-error, rise and inter")
	p.lose("a server marked down comes back after rise good health checks, which the simulator's replicas do not answer: it comes back after rise x inter")
	f.OutlierDetection = scenario.OutlierDetection{Use: scenario.OutlierEnvoy, Settings: st}
	return nil
}
