package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/trace"
)

// runTool runs the program with args and returns its exit code and outputs.
func runTool(args ...string) (int, string, string) { return callEnv(nil, args...) }

// record plays the named sandbox scenarios and records them with the
// observers cfg asks for, as demo --log DIR does. Spans and logs come from
// a run's events, so observing the events after the run records the same.
func record(t *testing.T, cfg traceConfig, names ...string) {
	t.Helper()
	obs, shutdown, err := newObservers(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		s, ok := orders.Lookup(name)
		if !ok {
			t.Fatalf("no scenario %s", name)
		}
		s.Ledger = store.NewMemory()
		res, _, err := s.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		for i := range res.Events {
			obs.Observe(ctx, &res.Events[i])
		}
		cancel()
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestTraceShow(t *testing.T) {
	dir := t.TempDir()
	record(t, traceConfig{LogDir: dir}, "normal")
	for _, ref := range []string{"run-normal", filepath.Join(dir, "run-normal.jsonl"), "run-nor"} {
		code, out, errOut := runTool("trace", "show", ref, "--log", dir)
		if code != exitOK || errOut != "" {
			t.Fatalf("trace show %s: exit %d, stderr:\n%s", ref, code, errOut)
		}
		for _, want := range []string{
			"run run-normal",
			`call   call_id=call_q1 tool=query_order args={"order_id":"<string:4>"}`,
			"result call_id=call_q1 tool=query_order status=ok",
			"result call_id=call_t1 tool=track_shipment status=ok",
			"decision tables",
			"timeline",
			"execute_tool query_order",
			"stopped status=final_answer",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("trace show %s lacks %q:\n%s", ref, want, out)
			}
		}
	}
	// Flags before the run, and the default directory from XDG_DATA_HOME.
	record(t, traceConfig{LogDir: filepath.Join(dir, "toolloop", "runs")}, "parallel")
	code, out, errOut := callEnv(map[string]string{"XDG_DATA_HOME": dir}, "trace", "show", "--width", "20", "run-parallel")
	if code != exitOK || !strings.Contains(out, "mode=parallel") {
		t.Errorf("trace show with the default directory: exit %d\n%s%s", code, out, errOut)
	}
}

func TestTraceDiagnose(t *testing.T) {
	dir := t.TempDir()
	record(t, traceConfig{LogDir: dir}, "normal", "spin_detected", "loop_forever")
	for _, tc := range []struct {
		run   string
		code  int
		first string
	}{
		{"run-normal", exitOK, "nothing suspicious"},
		{"run-spin_detected", exitFail, "1. seq 8 step 2 repeated_call calls call_q1, call_q2\n   call call_q2 asks for query_order with the same arguments as call call_q1"},
		{"run-loop_forever", exitFail, "1. seq 12 step 3 repeated_tool calls call_l1, call_l2, call_l3\n   the model called list_orders in 3 turns in a row"},
	} {
		code, out, errOut := runTool("trace", "diagnose", "--log", dir, tc.run)
		if code != tc.code || errOut != "" {
			t.Errorf("diagnose %s: exit %d, want %d; stderr:\n%s", tc.run, code, tc.code, errOut)
		}
		if !strings.Contains(out, tc.first) {
			t.Errorf("diagnose %s lacks %q:\n%s", tc.run, tc.first, out)
		}
	}
	code, out, _ := runTool("trace", "diagnose", "run-spin_detected", "--log", dir, "--json")
	var f trace.Finding
	if code != exitFail || json.Unmarshal([]byte(strings.Split(out, "\n")[0]), &f) != nil || f.Kind != trace.RepeatedCall {
		t.Errorf("diagnose --json: exit %d\n%s", code, out)
	}
}

func TestTraceErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "gone.jsonl")
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"trace"}, exitUsage, "Usage:"},
		{[]string{"trace", "inspect", "x"}, exitUsage, `unknown command "inspect"`},
		{[]string{"trace", "show"}, exitUsage, "want one RUN_ID (or a run log FILE)"},
		{[]string{"trace", "show", "a", "b", "--log", dir}, exitUsage, "got 2"},
		{[]string{"trace", "show", "run-x", "--log", dir}, exitUsage, filepath.Join(dir, "run-x.jsonl")},
		{[]string{"trace", "diagnose", missing}, exitUsage, "file " + missing},
		{[]string{"trace", "show", "--bogus", "run-x"}, exitUsage, "flag provided but not defined"},
		{[]string{"trace", "show", "--width", "2", "run-x"}, exitUsage, "--width 2"},
	} {
		code, out, errOut := runTool(tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.err) {
			t.Errorf("%v: exit %d, want %d; stderr %q lacks %q (stdout %q)", tc.args, code, tc.code, errOut, tc.err, out)
		}
	}
	for _, help := range [][]string{{"trace", "--help"}, {"trace", "help"}, {"trace", "show", "-h"}} {
		code, out, _ := runTool(help...)
		if code != exitOK || !strings.Contains(out, "toolloop trace show FILE|RUN_ID") {
			t.Errorf("%v: exit %d\n%s", help, code, out)
		}
	}
}

func TestStdoutExporter(t *testing.T) {
	var buf bytes.Buffer
	record(t, traceConfig{Exporter: exporterStdout, Stdout: &buf, Provider: "toolloop.scripted"}, "normal")
	out := buf.String()
	for _, want := range []string{`"Name":"invoke_agent"`, `"Name":"chat scripted-order-desk"`, `"Name":"execute_tool query_order"`,
		`"gen_ai.provider.name"`, `"toolloop.scripted"`, `"toolloop.status"`} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout exporter output lacks %s", want)
		}
	}
	if _, _, err := newObservers(traceConfig{Exporter: "jaeger"}); err == nil || !strings.Contains(err.Error(), "want none, stdout or otlp") {
		t.Errorf("unknown exporter: %v", err)
	}
	obs, shutdown, err := newObservers(traceConfig{Exporter: exporterNone})
	if obs != nil || err != nil || shutdown(context.Background()) != nil {
		t.Errorf("exporter none: %v, %v", obs, err)
	}
}

func TestOTLPExporter(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	record(t, traceConfig{Exporter: exporterOTLP, OTLPEndpoint: srv.URL, Provider: "toolloop.scripted"}, "normal", "parallel")
	mu.Lock()
	defer mu.Unlock()
	if len(paths) == 0 {
		t.Fatal("no export reached the collector")
	}
	for _, p := range paths {
		if p != "POST /v1/traces application/x-protobuf" {
			t.Errorf("request %s", p)
		}
	}
}

func TestOTLPURL(t *testing.T) {
	for in, want := range map[string]string{
		"localhost:4318":                   "http://localhost:4318/v1/traces",
		"http://collector:4318":            "http://collector:4318/v1/traces",
		"https://otel.example.com/":        "https://otel.example.com/v1/traces",
		"https://otel.example.com/custom/": "https://otel.example.com/custom/",
	} {
		if got, err := otlpURL(in); err != nil || got != want {
			t.Errorf("otlpURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"ftp://x", "http://", "::"} {
		if _, err := otlpURL(bad); err == nil {
			t.Errorf("otlpURL(%q) accepted", bad)
		}
	}
}

func TestObserversFromFlags(t *testing.T) {
	dir := t.TempDir()
	obs, shutdown, err := observersFromFlags(io.Discard, scriptedProvider, dir, "none", "")
	if err != nil || obs == nil {
		t.Fatalf("observersFromFlags: %v, %v", obs, err)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A log whose last line was cut off (a writer killed mid-line, a full
// disk) is shown up to there, with a note saying so.
func TestTraceShowReadsALogCutMidLine(t *testing.T) {
	dir := t.TempDir()
	record(t, traceConfig{LogDir: dir}, "normal")
	path := filepath.Join(dir, "run-normal.jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Cut the stop line in half.
	lastStart := strings.LastIndex(strings.TrimSuffix(string(data), "\n"), "\n") + 1
	cut := data[:lastStart+(len(data)-lastStart)/2]
	if err := os.WriteFile(path, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runTool("trace", "show", "run-normal", "--log", dir)
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	if !strings.Contains(errOut, "cut off") || !strings.Contains(out, "result call_id=call_q1") {
		t.Errorf("stderr %q lacks a note about the cut line, or stdout lacks the events before it:\n%s", errOut, out)
	}
}
