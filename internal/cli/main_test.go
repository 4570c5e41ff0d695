package cli

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/trace"
)

func TestMain(m *testing.M) {
	if serveMCPChild() {
		return
	}
	goleak.VerifyTestMain(m)
}

// call runs the program with args in an empty environment and returns its
// exit code and outputs.
func call(args ...string) (int, string, string) {
	return callEnv(nil, args...)
}

// callEnv runs the program with args in the environment env and returns
// its exit code and outputs.
func callEnv(env map[string]string, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, &out, &errb, func(k string) string { return env[k] }, nil)
	return code, out.String(), errb.String()
}

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }

func TestDemo(t *testing.T) {
	code, out, errOut := call("demo")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	if errOut != "" {
		t.Errorf("stderr not empty:\n%s", errOut)
	}
	got := lines(out)
	want := []string{
		"mode=normal status=final_answer",
		"mode=unknown_tool status=tool_not_allowed",
		"mode=loop_forever status=max_steps_exceeded",
	}
	if len(got) < len(want) {
		t.Fatalf("output:\n%s", out)
	}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("line %d = %q, want exactly %q", i+1, got[i], w)
		}
	}
	scenarios := orders.Defaults()
	if len(got) != len(scenarios) {
		t.Fatalf("%d lines for %d scenarios:\n%s", len(got), len(scenarios), out)
	}
	status := regexp.MustCompile(`^mode=(\S+) status=(\S+)( |$)`)
	count := map[string]int{}
	for i, l := range got {
		m := status.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("line %d %q is not a stop line", i+1, l)
			continue
		}
		if m[1] != scenarios[i].Name {
			t.Errorf("line %d is for mode %s, want %s", i+1, m[1], scenarios[i].Name)
		}
		count[m[2]]++
	}
	for _, st := range loop.Statuses() {
		want := 1
		if st == loop.FinalAnswer {
			want = 6 // normal, not_found, parallel, refund_retry, refund_twice, refund_reversed
		}
		if count[string(st)] != want {
			t.Errorf("status %s appears %d times, want %d", string(st), count[string(st)], want)
		}
	}
	for _, l := range got[3:] {
		if !strings.Contains(l, " steps=") || !strings.Contains(l, " detail=") {
			t.Errorf("line %q lacks steps= or detail=", l)
		}
	}
}

func TestDemoOneMode(t *testing.T) {
	code, out, errOut := call("demo", "--mode", "normal")
	if code != 0 || out != "mode=normal status=final_answer\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = call("demo", "-mode=spin_detected")
	if code != 0 || !strings.HasPrefix(out, "mode=spin_detected status=spin_detected steps=2 tool_calls=2 ") {
		t.Errorf("exit %d, stdout %q", code, out)
	}
}

func TestDemoUnknownMode(t *testing.T) {
	code, out, errOut := call("demo", "--mode", "nope")
	if code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if out != "" {
		t.Errorf("stdout %q, want nothing", out)
	}
	if n := len(lines(errOut)); n != 1 {
		t.Errorf("stderr has %d lines, want one:\n%s", n, errOut)
	}
	if !strings.Contains(errOut, `"nope"`) {
		t.Errorf("stderr does not name the bad mode: %s", errOut)
	}
	for _, name := range orders.Names() {
		if !strings.Contains(errOut, name) {
			t.Errorf("stderr does not list mode %s: %s", name, errOut)
		}
	}
}

func TestDemoHelp(t *testing.T) {
	for _, args := range [][]string{{"demo", "--help"}, {"demo", "-h"}, {"help", "demo"}} {
		code, out, errOut := call(args...)
		if code != 0 {
			t.Errorf("%v: exit %d, stderr %s", args, code, errOut)
		}
		for _, want := range []string{"--mode", "--trace", "--plan"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: help does not mention %s", args, want)
			}
		}
		for _, s := range orders.Scenarios() {
			if !strings.Contains(out, s.Name) || !strings.Contains(out, s.Description) {
				t.Errorf("%v: help does not list mode %s with its description", args, s.Name)
			}
		}
	}
}

func TestDemoBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "--bogus"},
		{"demo", "--mode"},
		{"demo", "--trace=maybe"},
		{"demo", "--plan=maybe"},
		{"demo", "normal"},
		{"frobnicate"},
		{"--verbose"},
		{"help", "frobnicate"},
	} {
		code, out, errOut := call(args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		if out != "" {
			t.Errorf("%v: stdout %q, want nothing", args, out)
		}
		if errOut == "" {
			t.Errorf("%v: no error message", args)
		}
	}
}

func TestUsage(t *testing.T) {
	code, out, errOut := call()
	if code != 2 || out != "" || !strings.Contains(errOut, "toolloop demo") {
		t.Errorf("no args: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, arg := range []string{"help", "-h", "--help"} {
		code, out, _ := call(arg)
		if code != 0 || !strings.Contains(out, "toolloop demo") {
			t.Errorf("%s: exit %d, stdout %q", arg, code, out)
		}
	}
}

func TestDemoTrace(t *testing.T) {
	code, out, errOut := call("demo", "--mode", "normal", "--trace")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	got := lines(out)
	if last := got[len(got)-1]; last != "mode=normal status=final_answer" {
		t.Errorf("last line %q, want the stop line", last)
	}
	for _, id := range []string{"call_q1", "call_t1"} {
		call := regexp.MustCompile(`(?m)^.* call +call_id=` + id + ` tool=\S+ args=\{.*\}$`)
		result := regexp.MustCompile(`(?m)^.* result call_id=` + id + ` tool=\S+ status=ok content=\{.*\}$`)
		ci, ri := call.FindStringIndex(out), result.FindStringIndex(out)
		if ci == nil || ri == nil {
			t.Errorf("trace lacks the call or the result of %s:\n%s", id, out)
			continue
		}
		if ci[0] > ri[0] {
			t.Errorf("result of %s comes before its call", id)
		}
	}
}

func TestDemoTraceErrors(t *testing.T) {
	_, out, _ := call("demo", "--mode", "not_found", "--trace")
	if !strings.Contains(out, "result call_id=call_q1 tool=query_order status=error kind=not_found content=") {
		t.Errorf("trace does not show the not_found result beside its call ID:\n%s", out)
	}
	_, out, _ = call("demo", "--mode", "protocol_error", "--trace")
	if strings.Count(out, "rejected  call   call_id=call_1 ") != 2 {
		t.Errorf("trace does not show the rejected calls:\n%s", out)
	}
	_, out, _ = call("demo", "--mode", "confirmation_required", "--trace")
	if !strings.Contains(out, "pending   call_id=call_r1 tool=refund_order") {
		t.Errorf("trace does not show the pending call:\n%s", out)
	}
}

func TestDemoTraceAll(t *testing.T) {
	code, out, _ := call("demo", "--trace")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, s := range orders.Defaults() {
		if !strings.Contains(out, "# trace mode="+s.Name+" ") {
			t.Errorf("no trace for %s", s.Name)
		}
	}
}

func TestDemoCanceledContext(t *testing.T) {
	// A caller that gives up (Ctrl-C) makes every run end canceled, which
	// is not what the scenarios expect: exit 1, and say which.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	code := Main(ctx, []string{"demo", "--mode", "normal"}, &out, &errb, nil, nil)
	if code != 1 || out.String() != "mode=normal status=canceled\n" || !strings.Contains(errb.String(), "want final_answer") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}

func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"":                    "(none)",
		`{ "a" : 1 }`:         `{ "a" : 1 }`,
		"{\n  \"a\": 1\n}":    `{"a":1}`,
		"not\njson":           `"not\njson"`,
		`{"s":"two  spaces"}`: `{"s":"two  spaces"}`,
	} {
		if got := trace.OneLine([]byte(in)); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDemoRefunds checks that the scenarios about writes report the book's
// refund count on their stop lines, and only they.
func TestDemoRefunds(t *testing.T) {
	_, out, _ := call("demo")
	want := map[string]string{
		"parallel": "refunds=1", "refund_retry": "refunds=1", "refund_twice": "refunds=1",
		"refund_unknown": `refunds=1 writes="partial: left for a person issue_voucher call_v1 (unknown)"`,
		// The refund happened, and was reversed: the writes say undone.
		"refund_reversed": `refunds=1 writes="undone: undone refund_order call_r1; not done issue_voucher call_v1 (failed)"`,
	}
	for _, l := range lines(out) {
		name := strings.TrimPrefix(strings.Fields(l)[0], "mode=")
		w, ok := want[name]
		switch {
		case ok && !strings.Contains(l, " "+w+" detail="):
			t.Errorf("line %q lacks %s before detail=", l, w)
		case !ok && strings.Contains(l, " refunds="):
			t.Errorf("line %q reports refunds", l)
		}
		delete(want, name)
	}
	if len(want) != 0 {
		t.Errorf("no stop lines for %v", want)
	}
	_, out, _ = call("demo", "--mode", "refund_unknown")
	if !strings.HasPrefix(out, `mode=refund_unknown status=tool_outcome_unknown steps=1 tool_calls=1 tokens=0 refunds=1 writes="partial: left for a person issue_voucher call_v1 (unknown)" detail=`) {
		t.Errorf("refund_unknown: %q", out)
	}
}

// planRow matches one row of a printed decision table.
var planRow = regexp.MustCompile(`^    (\S+) +(\S+) +(read_only|write) +(\S+) +(\d+) +(parallel|serial) +(\S.*)$`)

func TestDemoPlan(t *testing.T) {
	code, out, errOut := call("demo", "--mode", "parallel", "--plan")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	got := lines(out)
	if len(got) != 7 {
		t.Fatalf("want a heading, a header, four rows and the stop line:\n%s", out)
	}
	if got[0] != "# plan mode=parallel batch=1 step=1 calls=4 stages=3" {
		t.Errorf("heading %q", got[0])
	}
	header := regexp.MustCompile(`^    CALL_ID +TOOL +EFFECT +RESOURCES +STAGE +MODE +REASON$`)
	if !header.MatchString(got[1]) {
		t.Errorf("header %q", got[1])
	}
	type row struct{ tool, effect, resources, stage, mode, reason string }
	rows := map[string]row{}
	var order []string
	for _, l := range got[2:6] {
		m := planRow.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("row %q does not parse", l)
			continue
		}
		rows[m[1]] = row{m[2], m[3], m[4], m[5], m[6], m[7]}
		order = append(order, m[1])
		// Aligned: every column starts where the header's does.
		for _, col := range []string{"TOOL", "EFFECT", "RESOURCES", "STAGE", "MODE", "REASON"} {
			at := strings.Index(got[1], col)
			if at >= len(l) || l[at-1] != ' ' || l[at] == ' ' {
				t.Errorf("row %q: column %s is not aligned with the header", l, col)
			}
		}
	}
	if strings.Join(order, " ") != "call_q1 call_t1 call_r1 call_q2" {
		t.Errorf("rows in order %v, want the model's order", order)
	}
	want := map[string]row{
		"call_q1": {"query_order", "read_only", "order:A100", "0", "parallel", "read-only and independent"},
		"call_t1": {"track_shipment", "read_only", "order:A101", "0", "parallel", "read-only and independent"},
		"call_r1": {"refund_order", "write", "order:A103", "1", "serial", ""},
		"call_q2": {"query_order", "read_only", "order:A103", "2", "serial", ""},
	}
	for id, w := range want {
		g := rows[id]
		r := g.reason
		if w.reason == "" {
			g.reason = ""
		}
		if g != w {
			t.Errorf("%s: row %+v, want %+v", id, g, w)
		}
		if id == "call_r1" && !strings.Contains(r, "write") {
			t.Errorf("call_r1: reason %q does not say it is a write", r)
		}
		if id == "call_q2" && !strings.Contains(r, "call_r1") {
			t.Errorf("call_q2: reason %q does not name call_r1", r)
		}
	}
	if !strings.HasPrefix(got[6], "mode=parallel status=final_answer ") {
		t.Errorf("last line %q, want the stop line", got[6])
	}
}

func TestDemoPlanAll(t *testing.T) {
	code, out, errOut := call("demo", "--plan", "--trace")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	// Per scenario: its trace, then its plans, then its stop line.
	var stops int
	for _, s := range orders.Defaults() {
		tr := strings.Index(out, "# trace mode="+s.Name+" ")
		pl := strings.Index(out, "# plan mode="+s.Name+" batch=1 ")
		if pl < 0 {
			pl = strings.Index(out, "# plan mode="+s.Name+": no batch was planned")
		}
		st := strings.Index(out, "\nmode="+s.Name+" status=")
		if tr < 0 || pl < 0 || st < 0 || !(tr < pl && pl < st) {
			t.Errorf("%s: trace at %d, plan at %d, stop line at %d; want them in that order", s.Name, tr, pl, st)
		}
		stops++
	}
	// Three batches in refund_twice, one per tool-calling turn.
	if !strings.Contains(out, "# plan mode=refund_twice batch=3 step=3 calls=1 stages=1\n") {
		t.Errorf("refund_twice's third batch is missing")
	}
	if !strings.Contains(out, "# plan mode=unknown_tool: no batch was planned\n") {
		t.Errorf("unknown_tool planned a batch")
	}
	_, plain, _ := call("demo")
	if p := lines(plain); len(p) != stops || p[0] != "mode=normal status=final_answer" {
		t.Errorf("--plan changed the plain demo:\n%s", plain)
	}
}

// TestDemoTraceLedger checks that the trace says what the idempotency
// ledger made of each write.
func TestDemoTraceLedger(t *testing.T) {
	for mode, want := range map[string][]string{
		"parallel":       {"result call_id=call_r1 tool=refund_order status=ok key=refund:A103 ledger=executed content="},
		"refund_retry":   {"result call_id=call_r1 tool=refund_order status=ok key=refund:A103 ledger=reconciled content="},
		"refund_twice":   {"result call_id=call_r1 tool=refund_order status=ok key=refund:A103 ledger=executed content=", "result call_id=call_r2 tool=refund_order status=ok key=refund:A103 ledger=replayed content="},
		"refund_unknown": {"result call_id=call_v1 tool=issue_voucher status=error kind=timeout key=run-refund_unknown/call_v1 ledger=outcome_unknown content="},
	} {
		_, out, _ := call("demo", "--mode", mode, "--trace")
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: trace lacks %q:\n%s", mode, w, out)
			}
		}
		if mode == "parallel" && strings.Contains(out, "call_q1 tool=query_order status=ok key=") {
			t.Errorf("a read has a ledger note:\n%s", out)
		}
	}
}
