package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
)

const citySchema = `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`

func outputRun(t *testing.T, cfg loop.Config, turns ...llmtest.Turn) (*loop.Result, *llmtest.Model) {
	t.Helper()
	m := llmtest.New(turns...)
	tools, err := tool.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Model, cfg.Tools = m, tools
	if cfg.OutputSchema == nil {
		cfg.OutputSchema = json.RawMessage(citySchema)
	}
	res, _ := loop.Run(context.Background(), cfg, []llm.Message{llm.UserMessage("city?")})
	if res == nil {
		t.Fatal("no result")
	}
	return res, m
}

// A streamed run is held to the schema as a whole one is, and each
// request carries the schema, its name and strictness.
func TestOutputStreamed(t *testing.T) {
	res, m := outputRun(t, loop.Config{Stream: true, OutputName: "city", OutputStrict: true},
		llmtest.Text("Oslo"), llmtest.Text(`{"city":"Oslo"}`))
	if string(res.Output) != `{"city":"Oslo"}` || res.Steps != 2 {
		t.Fatalf("output %s after %d steps (%s: %s)", res.Output, res.Steps, res.Status, res.Detail)
	}
	for i, req := range m.Requests() {
		if o := req.Output; o == nil || o.Name != "city" || !o.Strict || string(o.Schema) != citySchema {
			t.Errorf("request %d: output %+v", i+1, o)
		}
	}
}

// With no turn left for a correction, a wrong answer stops the run at once
// with invalid_output, saying so; OutputRetries -1 allows none.
func TestOutputNoTurnLeft(t *testing.T) {
	res, _ := outputRun(t, loop.Config{Budgets: loop.Budgets{MaxSteps: 1}}, llmtest.Text("Oslo"))
	if res.Status != loop.InvalidOutput || !strings.Contains(res.Detail, "no turn is left to correct it") {
		t.Fatalf("%s: %s", res.Status, res.Detail)
	}
	res, _ = outputRun(t, loop.Config{OutputRetries: -1}, llmtest.Text("{}"))
	if res.Status != loop.InvalidOutput || res.Steps != 1 || !strings.Contains(res.Detail, `answer 1 of 1 allowed was refused: the answer does not match the schema: missing required field "city"`) {
		t.Fatalf("%s after %d steps: %s", res.Status, res.Steps, res.Detail)
	}
}

// A schema the validator refuses, or a bad name, is an error of NewRunner
// that names it; nothing runs.
func TestOutputBadConfig(t *testing.T) {
	tools, _ := tool.NewRegistry()
	for _, tc := range []struct {
		cfg  loop.Config
		want string
	}{
		{loop.Config{OutputSchema: json.RawMessage(`{"type":"objekt"}`)}, "output schema is not a valid JSON Schema"},
		{loop.Config{OutputSchema: json.RawMessage(`[1]`)}, "output schema must be a JSON object"},
		{loop.Config{OutputSchema: json.RawMessage(`{"$ref":"https://example.com/s.json"}`)}, "may refer only to itself"},
		{loop.Config{OutputSchema: json.RawMessage(citySchema), OutputName: "a b"}, `output schema name "a b"`},
	} {
		tc.cfg.Model, tc.cfg.Tools = llmtest.New(), tools
		if _, err := loop.NewRunner(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewRunner(%s) = %v, want an error with %q", tc.cfg.OutputSchema, err, tc.want)
		}
	}
}

// Decode of a run without a schema says so; OutputJSON takes a fenced
// answer's JSON and leaves anything else as it is.
func TestDecodeAndOutputJSON(t *testing.T) {
	tools, _ := tool.NewRegistry()
	res, err := loop.Run(context.Background(), loop.Config{Model: llmtest.New(llmtest.Text("hi")), Tools: tools},
		[]llm.Message{llm.UserMessage("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loop.Decode[map[string]any](res); !errors.Is(err, loop.ErrNoOutput) {
		t.Errorf("Decode without a schema: %v", err)
	}
	for in, want := range map[string]string{
		" {\"a\":1}\n":            "{\"a\":1}",
		"```json\n{\"a\":1}\n```": "{\"a\":1}",
		"```\n[1]\n```":           "[1]",
		"```json {\"a\":1}```":    "```json {\"a\":1}```",
		"```a```\ntext\n```b```":  "```a```\ntext\n```b```",
		"Here:\n```json\n{}\n```": "Here:\n```json\n{}\n```",
	} {
		if got := string(loop.OutputJSON(in)); got != want {
			t.Errorf("OutputJSON(%q) = %q, want %q", in, got, want)
		}
	}
}

// A run resumed from its log holds answers to the schema its started
// event recorded, though the resuming runner has none configured: the
// log of a run cut after one rejected answer resumes to a correction
// count of one (one more allowed, of the default two), and the request
// carries the recorded schema.
func TestOutputResumedFromLog(t *testing.T) {
	full, _ := outputRun(t, loop.Config{}, llmtest.Text("Oslo"), llmtest.Text(`{"town":"Oslo"}`), llmtest.Text(`{"city":"Oslo"}`))
	if full.Status != loop.FinalAnswer || full.Steps != 3 {
		t.Fatalf("%s after %d steps: %s", full.Status, full.Steps, full.Detail)
	}
	// The log up to the first answer, as a driver that crashed while
	// asking for the second would leave it.
	cut := 2
	st := store.NewMemory()
	var recs []store.EventRecord
	for _, ev := range full.Events[:cut] {
		data, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, store.EventRecord{Seq: ev.Seq, Kind: string(ev.Kind), At: ev.At, Data: data})
	}
	if err := st.Append(context.Background(), full.RunID, recs, store.RunSummary{RunID: full.RunID, Status: loop.RunningStatus}); err != nil {
		t.Fatal(err)
	}
	tools, _ := tool.NewRegistry()
	m := llmtest.New(llmtest.Text(`{"town":"Oslo"}`), llmtest.Text(`{"town":"Bergen"}`))
	r, err := loop.NewRunner(loop.Config{Model: m, Tools: tools, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := r.Resume(context.Background(), full.RunID)
	if res == nil || res.Status != loop.InvalidOutput || !strings.Contains(res.Detail, "answer 3 of 3 allowed") {
		t.Fatalf("resumed: %+v", res)
	}
	if o := m.Requests()[0].Output; o == nil || string(o.Schema) != citySchema {
		t.Errorf("the resumed run's request asks for %+v, want the recorded schema", o)
	}
}

// JSON cut off at the output token limit is refused, and the correction
// says why it broke off.
func TestOutputTruncated(t *testing.T) {
	cut := llmtest.Text(`{"city":"Os`)
	cut.Response.Truncated = true
	res, m := outputRun(t, loop.Config{}, cut, llmtest.Text(`{"city":"Oslo"}`))
	if res.Status != loop.FinalAnswer || res.Steps != 2 {
		t.Fatalf("%s after %d steps: %s", res.Status, res.Steps, res.Detail)
	}
	msgs := m.Requests()[1].Messages
	if got := msgs[len(msgs)-1].Text; !strings.Contains(got, "the answer is not JSON") || !strings.Contains(got, "cut off at the output token limit") {
		t.Errorf("correction %q does not say the answer was cut off", got)
	}
}
