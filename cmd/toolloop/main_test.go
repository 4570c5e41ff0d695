package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/loop"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// call runs the program with args and returns its exit code and outputs.
func call(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
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
	scenarios := orders.Scenarios()
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
		switch st {
		case loop.FinalAnswer:
			want = 2
		case loop.ToolOutcomeUnknown:
			want = 0
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
		for _, want := range []string{"--mode", "--trace"} {
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
	for _, s := range orders.Scenarios() {
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
	code := run(ctx, []string{"demo", "--mode", "normal"}, &out, &errb)
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
		if got := oneLine([]byte(in)); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
}
