package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
)

// streamScript is a turn of two parallel calls, with text, then a final
// answer, each with its usage.
func streamScript() []llmtest.Turn {
	t1 := llmtest.Calls(call("c1", "query_order", `{"id":"A1"}`), call("c2", "query_order", `{"id":"A2"}`)).WithUsage(100, 20)
	t1.Response.Message.Text = "Let me look both up."
	return []llmtest.Turn{t1, llmtest.Text("Both have shipped.").WithUsage(150, 10)}
}

// The watch sequence of a run with parallel calls: turn 1's deltas, its
// assembled turn, then per call validated and authorized with complete
// arguments, the plan, each call started and finished, step 1 finished
// with its usage; turn 2 the same way; the stop last.
func TestWatchSequence(t *testing.T) {
	f := newFixture(t)
	var ups []loop.Update
	res, err := loop.Run(context.Background(), loop.Config{Stream: true, Model: llmtest.New(streamScript()...), Tools: f.reg,
		Watch: func(_ context.Context, u loop.Update) { ups = append(ups, u) }}, user("where are A1 and A2?"))
	mustStatus(t, res, err, loop.FinalAnswer)

	var kinds []string
	text := map[int]string{}
	lastDelta := map[int]int{}
	for i, u := range ups {
		if u.Kind == loop.UpdateDelta {
			if u.Delta.Kind == llm.DeltaText {
				text[u.Step] += u.Delta.Text
			}
			lastDelta[u.Step] = i
			if len(kinds) > 0 && kinds[len(kinds)-1] == "delta" {
				continue // one entry for a run of deltas
			}
		}
		kinds = append(kinds, string(u.Kind))
	}
	want := []string{"delta", "model_responded",
		"call_validated", "call_validated", "call_authorized", "call_authorized", "stage_planned",
		"call_started", "call_finished", "call_started", "call_finished", "step_finished",
		"delta", "model_responded", "step_finished", "stopped"}
	// The two calls run in one stage, side by side: their starts and
	// finishes may interleave, so compare them as a set.
	norm := func(k []string) []string {
		k = slices.Clone(k)
		if len(k) > 11 {
			slices.Sort(k[7:11])
		}
		return k
	}
	if !slices.Equal(norm(kinds), norm(want)) {
		t.Fatalf("updates\n%v\nwant\n%v", kinds, want)
	}
	if text[1] != "Let me look both up." || text[2] != "Both have shipped." {
		t.Errorf("streamed text %v", text)
	}
	started := map[string]bool{}
	for i, u := range ups {
		if u.Call != nil {
			// A call update never comes before the last delta of its
			// turn, and carries the call's complete arguments.
			if i < lastDelta[u.Step] {
				t.Errorf("update %d (%s of %s) came before the turn's last delta (%d)", i, u.Kind, u.Call.ID, lastDelta[u.Step])
			}
			wantArgs := map[string]string{"c1": `{"id":"A1"}`, "c2": `{"id":"A2"}`}[u.Call.ID]
			if string(u.Call.Arguments) != wantArgs || !json.Valid(u.Call.Arguments) {
				t.Errorf("%s of %s has arguments %s, want %s", u.Kind, u.Call.ID, u.Call.Arguments, wantArgs)
			}
			if u.Step != 1 || res.Messages[1].ToolCalls[u.Index].ID != u.Call.ID {
				t.Errorf("%s of %s: step %d, index %d", u.Kind, u.Call.ID, u.Step, u.Index)
			}
		}
		switch u.Kind {
		case loop.UpdateCallValidated:
			if !u.Check.Known || u.Check.Problem != "" {
				t.Errorf("check of %s = %+v", u.Call.ID, u.Check)
			}
		case loop.UpdateCallAuthorized:
			if u.Decision.Verdict != "allow" {
				t.Errorf("decision on %s = %+v", u.Call.ID, u.Decision)
			}
		case loop.UpdateStagePlanned:
			if len(u.Plan.Stages) != 1 || len(u.Plan.Stages[0]) != 2 || len(u.Plan.Table) != 2 || u.Plan.Table[0].Reason == "" {
				t.Errorf("plan = %+v, want one stage of both calls, with a reason", u.Plan)
			}
		case loop.UpdateCallStarted:
			started[u.Call.ID] = true
		case loop.UpdateCallFinished:
			if !started[u.Call.ID] || u.Outcome.Result.Status != llm.StatusOK || u.Outcome.Result.CallID != u.Call.ID {
				t.Errorf("finish of %s: started %v, outcome %+v", u.Call.ID, started[u.Call.ID], u.Outcome.Result)
			}
		case loop.UpdateStepFinished:
			wantUsage := map[int]llm.Usage{1: {InputTokens: 100, OutputTokens: 20}, 2: {InputTokens: 150, OutputTokens: 10}}[u.Step]
			wantTotal := map[int]llm.Usage{1: {InputTokens: 100, OutputTokens: 20}, 2: {InputTokens: 250, OutputTokens: 30}}[u.Step]
			if u.Usage != wantUsage || u.Total != wantTotal {
				t.Errorf("step %d finished with usage %+v, total %+v; want %+v, %+v", u.Step, u.Usage, u.Total, wantUsage, wantTotal)
			}
		case loop.UpdateStopped:
			if u.Status != loop.FinalAnswer || u.Detail != res.Detail {
				t.Errorf("stopped %s %q, want the run's", u.Status, u.Detail)
			}
		}
	}
}

// timeless returns a log's JSON without what differs between two runs of
// the same script: event times, latencies and call timings.
func timeless(t *testing.T, events []loop.Event) string {
	t.Helper()
	var b strings.Builder
	for _, ev := range events {
		ev.At, ev.Latency = time.Time{}, 0
		ev.Outcomes = slices.Clone(ev.Outcomes)
		for i := range ev.Outcomes {
			ev.Outcomes[i].Started, ev.Outcomes[i].Duration = time.Time{}, 0
		}
		data, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
		b.WriteByte('\n')
	}
	return b.String()
}

// A streamed run's durable log is the one the same run records with
// Stream false (times apart): the assembled turns, no deltas. Whether the
// model is streamed depends on Stream alone, not on a watcher.
func TestStreamedLogEqualsNoStream(t *testing.T) {
	logs := map[string]string{}
	for _, mode := range []string{"streamed+watched", "streamed", "no-stream"} {
		f := newFixture(t)
		var pieces atomic.Int32
		turns := streamScript()
		for i := range turns {
			turns[i].OnDelta = func(context.Context, int) error { pieces.Add(1); return nil }
		}
		st := store.NewMemory()
		cfg := loop.Config{Model: llmtest.New(turns...), Tools: f.reg, Store: st, Stream: mode != "no-stream",
			NewRunID: func() string { return "run-1" }}
		if mode == "streamed+watched" {
			cfg.Watch = func(context.Context, loop.Update) {}
		}
		res, err := loop.Run(context.Background(), cfg, user("where are A1 and A2?"))
		mustStatus(t, res, err, loop.FinalAnswer)
		if streamed := pieces.Load() > 0; streamed != (mode != "no-stream") {
			t.Errorf("%s: the model streamed %d deltas", mode, pieces.Load())
		}
		events, err := loop.LoadEvents(context.Background(), st, "run-1")
		if err != nil {
			t.Fatal(err)
		}
		logs[mode] = timeless(t, events)
		if strings.Contains(logs[mode], `"delta`) || strings.Contains(logs[mode], "tool_call_arguments") {
			t.Errorf("%s: the log records deltas:\n%s", mode, logs[mode])
		}
	}
	if logs["streamed"] != logs["no-stream"] || logs["streamed+watched"] != logs["no-stream"] {
		t.Errorf("logs differ\nstreamed:\n%s\nwatched:\n%s\nno-stream:\n%s", logs["streamed"], logs["streamed+watched"], logs["no-stream"])
	}
}

// A stream that fails before its first delta is retried like a request,
// and the attempt counts; the watcher sees only the attempt that went on.
func TestStreamRetriedBeforeFirstDelta(t *testing.T) {
	f := newFixture(t)
	busy := &llm.Error{Kind: llm.KindUnavailable, Retryable: true, Err: errors.New("busy")}
	m := llmtest.New(llmtest.Text("first try").BreakAfter(0, busy), llmtest.Text("second try"))
	var text string
	res, err := loop.Run(context.Background(), loop.Config{Stream: true, Model: m, Tools: f.reg, ModelRetryBackoff: time.Millisecond,
		Watch: func(_ context.Context, u loop.Update) {
			if u.Kind == loop.UpdateDelta {
				text += u.Delta.Text
			}
		}}, user("hi"))
	mustStatus(t, res, err, loop.FinalAnswer)
	if res.Answer() != "second try" || text != "second try" || len(m.Requests()) != 2 {
		t.Errorf("answer %q, streamed %q, %d requests; want the second try's, twice asked", res.Answer(), text, len(m.Requests()))
	}
	if ev := res.Events[1]; ev.Kind != loop.ModelResponded || ev.Attempts != 2 {
		t.Errorf("event 2 = %s with %d attempt(s), want model_responded after 2", ev.Kind, ev.Attempts)
	}
}

// A stream that breaks after its first delta ends the run with
// model_error: it is not retried, even though its failure is retryable,
// and the model_failed event keeps what was received.
func TestStreamBrokenAfterFirstDelta(t *testing.T) {
	f := newFixture(t)
	broke := &llm.Error{Kind: llm.KindUnavailable, Retryable: true, Err: llm.ErrStreamEnded}
	turns := streamScript()
	m := llmtest.New(turns[0].BreakAfter(5, broke), llmtest.Text("never"))
	res, err := loop.Run(context.Background(), loop.Config{Stream: true, Model: m, Tools: f.reg, ModelRetryBackoff: time.Millisecond}, user("hi"))
	mustStatus(t, res, err, loop.ModelError)
	if n := len(m.Requests()); n != 1 {
		t.Errorf("the model was asked %d times, want once", n)
	}
	ev := res.Events[len(res.Events)-2]
	if ev.Kind != loop.ModelFailed || ev.Attempts != 1 || ev.Failure.Kind != loop.FailModel || ev.Response == nil {
		t.Fatalf("event before the stop = %+v, want model_failed after 1 attempt with the partial turn", ev)
	}
	if got := ev.Response.Message.Text; got == "" || !strings.HasPrefix("Let me look both up.", got) || ev.Response.FinishReason != "" {
		t.Errorf("partial turn %+v, want the start of the text and no finish", ev.Response)
	}
	if !strings.Contains(res.Detail, "not retried") || !strings.Contains(res.Detail, llm.ErrStreamEnded.Error()) {
		t.Errorf("detail %q, want it to say the stream broke and is not retried", res.Detail)
	}
	if res.Steps != 0 || len(res.Messages) != 1 {
		t.Errorf("steps %d, %d messages: a broken turn must not enter the history", res.Steps, len(res.Messages))
	}
}

// A stream that fails after deltas with nothing to show (the usage a
// provider sends at once, then an overload error) has shown nothing: it is
// retried like a request.
func TestStreamRetriedAfterUsageOnly(t *testing.T) {
	f := newFixture(t)
	overloaded := &llm.Error{Kind: llm.KindUnavailable, Retryable: true, Err: errors.New("overloaded_error")}
	// Text's first delta is its input usage.
	m := llmtest.New(llmtest.Text("never shown").WithUsage(100, 0).BreakAfter(1, overloaded), llmtest.Text("second try"))
	res, err := loop.Run(context.Background(), loop.Config{Stream: true, Model: m, Tools: f.reg, ModelRetryBackoff: time.Millisecond}, user("hi"))
	mustStatus(t, res, err, loop.FinalAnswer)
	if n := len(m.Requests()); n != 2 || res.Answer() != "second try" {
		t.Errorf("the model was asked %d times, answer %q; want a retry that answered", n, res.Answer())
	}
}

// seqModel streams fixed deltas; it counts the streams it was asked for
// and those its consumer stopped early (yield returned false). It ignores
// its context, as a careless adapter might: the loop must still stop.
type seqModel struct {
	deltas   []llm.Delta
	onDelta  func(i int)
	streams  atomic.Int32
	stopped  atomic.Int32
	finished atomic.Int32
}

func (m *seqModel) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	return llm.Collect(m.Stream(ctx, req))
}

func (m *seqModel) Stream(_ context.Context, _ *llm.Request) iter.Seq2[llm.Delta, error] {
	return func(yield func(llm.Delta, error) bool) {
		m.streams.Add(1)
		for i, d := range m.deltas {
			if m.onDelta != nil {
				m.onDelta(i)
			}
			if !yield(d, nil) {
				m.stopped.Add(1)
				return
			}
		}
		m.finished.Add(1)
	}
}

// A stream whose pieces contradict each other ends the run with
// protocol_error, not model_error, the loop stops reading it, and what it
// assembled is kept; so does a Generate that reports llm.KindProtocolError.
func TestStreamProtocolError(t *testing.T) {
	f := newFixture(t)
	m := &seqModel{deltas: []llm.Delta{
		{Kind: llm.DeltaText, Text: "Looking"},
		{Kind: llm.DeltaToolCallStart, Index: 0, Call: &llm.ToolCall{ID: "c1", Name: "query_order"}},
		{Kind: llm.DeltaToolCallStart, Index: 0, Call: &llm.ToolCall{ID: "c2", Name: "query_order"}},
		{Kind: llm.DeltaToolCallArguments, Index: 0, Text: `{}`},
		{Kind: llm.DeltaFinish, Finish: &llm.Finish{FinishReason: "tool_calls"}},
	}}
	res, err := loop.Run(context.Background(), loop.Config{Stream: true, Model: m, Tools: f.reg}, user("hi"))
	mustStatus(t, res, err, loop.ProtocolError)
	ev := res.Events[len(res.Events)-2]
	if ev.Kind != loop.ModelFailed || ev.Failure.Kind != loop.FailProtocol || ev.Response == nil || ev.Response.Message.Text != "Looking" {
		t.Fatalf("event before the stop = %+v, want model_failed (protocol) with the partial turn", ev)
	}
	if !strings.Contains(res.Detail, "started twice") {
		t.Errorf("detail %q, want it to name the inconsistency", res.Detail)
	}
	if m.streams.Load() != 1 || m.stopped.Load() != 1 {
		t.Errorf("%d stream(s), %d stopped by the loop; want one, abandoned at the bad piece", m.streams.Load(), m.stopped.Load())
	}

	bad := llm.ModelFunc(func(context.Context, *llm.Request) (*llm.Response, error) {
		return nil, &llm.Error{Kind: llm.KindProtocolError, Err: errors.New("inconsistent reply")}
	})
	res, err = loop.Run(context.Background(), loop.Config{Stream: true, Model: bad, Tools: f.reg}, user("hi"))
	mustStatus(t, res, err, loop.ProtocolError)
}

// Canceling a run mid-stream ends it canceled, with what was received in
// the log, and the stream is closed: a model that notices its context
// stops at once, and one that does not is abandoned by the loop (its
// yield returns false) at the next delta.
func TestStreamCanceledMidStream(t *testing.T) {
	t.Run("model notices", func(t *testing.T) {
		f := newFixture(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		turn := llmtest.Text("a long answer that never ends")
		turn.OnDelta = func(ctx context.Context, i int) error {
			if i == 2 {
				cancel()
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}
		m := llmtest.New(turn)
		res, err := loop.Run(ctx, loop.Config{Stream: true, Model: m, Tools: f.reg}, user("hi"))
		mustStatus(t, res, err, loop.Canceled)
		if m.Abandoned() != 1 {
			t.Errorf("Abandoned() = %d, want the stream closed", m.Abandoned())
		}
		ev := res.Events[len(res.Events)-2]
		if ev.Kind != loop.ModelFailed || ev.Failure.Kind != loop.FailCanceled || ev.Response == nil || ev.Response.Message.Text != "a long answer th" {
			t.Errorf("event before the stop = %+v, want model_failed (canceled) with two pieces", ev)
		}
	})
	t.Run("model ignores its context", func(t *testing.T) {
		f := newFixture(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		m := &seqModel{deltas: []llm.Delta{{Kind: llm.DeltaText, Text: "a"}, {Kind: llm.DeltaText, Text: "b"},
			{Kind: llm.DeltaText, Text: "c"}, {Kind: llm.DeltaFinish, Finish: &llm.Finish{}}}}
		res, err := loop.Run(ctx, loop.Config{Stream: true, Model: m, Tools: f.reg, Watch: func(_ context.Context, u loop.Update) {
			if u.Kind == loop.UpdateDelta && u.Delta.Text == "b" {
				cancel()
			}
		}}, user("hi"))
		mustStatus(t, res, err, loop.Canceled)
		if m.stopped.Load() != 1 || m.finished.Load() != 0 {
			t.Errorf("stopped %d, finished %d: the loop went on reading a canceled stream", m.stopped.Load(), m.finished.Load())
		}
	})
}

// Config.ModelTimeout bounds how long a stream may go quiet, not how
// long it lasts: quiet before its first delta, it is retried; quiet
// after, the run ends model_error; a slow stream that keeps coming is
// never cut off.
func TestStreamModelTimeoutIsIdleTime(t *testing.T) {
	const timeout = 100 * time.Millisecond
	stall := func(at int) func(ctx context.Context, i int) error {
		return func(ctx context.Context, i int) error {
			if i == at {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		}
	}
	f := newFixture(t)
	first := llmtest.Text("stalled")
	first.OnDelta = stall(0)
	m := llmtest.New(first, llmtest.Text("answered"))
	res, err := loop.Run(context.Background(), loop.Config{Stream: true, Model: m, Tools: f.reg, ModelTimeout: timeout, ModelRetryBackoff: time.Millisecond}, user("hi"))
	mustStatus(t, res, err, loop.FinalAnswer)
	if res.Answer() != "answered" || res.Events[1].Attempts != 2 {
		t.Errorf("answer %q after %d attempt(s), want the second attempt's", res.Answer(), res.Events[1].Attempts)
	}

	mid := llmtest.Text("stalled part-way through")
	mid.OnDelta = stall(2)
	m = llmtest.New(mid, llmtest.Text("never"))
	res, err = loop.Run(context.Background(), loop.Config{Stream: true, Model: m, Tools: f.reg, ModelTimeout: timeout, ModelRetryBackoff: time.Millisecond}, user("hi"))
	mustStatus(t, res, err, loop.ModelError)
	if len(m.Requests()) != 1 || !strings.Contains(res.Detail, "model request timeout") {
		t.Errorf("%d request(s), detail %q; want one, ended by the timeout", len(m.Requests()), res.Detail)
	}

	slow := llmtest.Text("a slow but steady answer")
	slow.OnDelta = func(ctx context.Context, i int) error {
		time.Sleep(timeout / 4)
		return nil
	}
	res, err = loop.Run(context.Background(), loop.Config{Stream: true, Model: llmtest.New(slow), Tools: f.reg, ModelTimeout: timeout}, user("hi"))
	mustStatus(t, res, err, loop.FinalAnswer)
	if res.Events[1].Latency < timeout {
		t.Errorf("the stream took %v, want longer than the timeout (%v) for this test to mean anything", res.Events[1].Latency, timeout)
	}
}

// A run paused for confirmation tells its watcher of the decisions, that
// its step finished as far as it went, and the pause; the drive that goes
// on after the answer tells of the approved call, the step's end, and the
// next turn.
func TestWatchAcrossConfirmation(t *testing.T) {
	r := &refunds{applied: map[string]int{}}
	f := newFixture(t, r.tool(t, true))
	var ups []string
	cfg := loop.Config{Stream: true,
		Model: llmtest.New(llmtest.Calls(call("c1", "query_order", `{"id":"A1"}`), call("c2", "refund_order", `{"order_id":"A1"}`)),
			llmtest.Text("done")),
		Tools: f.reg, Store: store.NewMemory(), Policy: policy.ConfirmWrites(),
		Watch: func(_ context.Context, u loop.Update) {
			s := string(u.Kind)
			switch {
			case u.Kind == loop.UpdateDelta:
				if len(ups) > 0 && ups[len(ups)-1] == "delta" {
					return
				}
			case u.Decision != nil:
				s += " " + u.Call.ID + " " + string(u.Decision.Verdict)
			case u.Call != nil:
				s += " " + u.Call.ID
			case u.Kind == loop.UpdateStepFinished:
				s += " " + string(rune('0'+u.Step))
			case u.Kind == loop.UpdateStopped:
				s += " " + string(u.Status)
			}
			ups = append(ups, s)
		}}
	runner, err := loop.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := runner.Run(ctx, user("refund A1"))
	mustStatus(t, res, err, loop.ConfirmationRequired)
	want := "delta model_responded call_validated c1 call_validated c2 call_authorized c1 allow call_authorized c2 needs_confirmation step_finished 1 stopped confirmation_required"
	if got := strings.Join(ups, " "); got != want {
		t.Errorf("paused run's updates\n%s\nwant\n%s", got, want)
	}
	ups = nil
	if err := loop.Decide(ctx, cfg.Store, res.RunID, loop.Confirmation{CallID: "c2", Approved: true, By: "alice"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	res, err = runner.Resume(ctx, res.RunID)
	mustStatus(t, res, err, loop.FinalAnswer)
	want = "stage_planned call_started c1 call_finished c1 call_started c2 call_finished c2 step_finished 1 delta model_responded step_finished 2 stopped final_answer"
	if got := strings.Join(ups, " "); got != want {
		t.Errorf("resumed run's updates\n%s\nwant\n%s", got, want)
	}
}

// A stream that sends nothing but usage reports is quiet: it does not
// hold the attempt open past Config.ModelTimeout (it ran to the run's
// deadline when every delta counted as heard).
func TestStreamUsageOnlyIsQuiet(t *testing.T) {
	f := newFixture(t)
	m := &llmtest.Lingering{UsageEvery: 10 * time.Millisecond}
	res, err := loop.Run(context.Background(), loop.Config{Stream: true, Model: m, Tools: f.reg, ModelTimeout: 100 * time.Millisecond,
		ModelRetries: -1, Budgets: loop.Budgets{Deadline: 3 * time.Second}}, user("hi"))
	mustStatus(t, res, err, loop.ModelError)
	if !strings.Contains(res.Detail, "sent nothing for 100ms") || res.Duration > 2*time.Second {
		t.Errorf("detail %q after %v; want the model request timeout, well before the deadline", res.Detail, res.Duration)
	}
}

// A complete turn (its finish received) whose connection then stays
// silent is the turn: the quiet time that follows does not throw it away.
func TestStreamCompleteThenSilent(t *testing.T) {
	f := newFixture(t)
	m := &llmtest.Lingering{Deltas: []llm.Delta{
		{Kind: llm.DeltaText, Text: "All done."},
		{Kind: llm.DeltaUsage, Usage: &llm.Usage{InputTokens: 30, OutputTokens: 3}},
		{Kind: llm.DeltaFinish, Finish: &llm.Finish{FinishReason: "stop"}},
	}}
	res, err := loop.Run(context.Background(), loop.Config{Stream: true, Model: m, Tools: f.reg, ModelTimeout: 100 * time.Millisecond}, user("hi"))
	mustStatus(t, res, err, loop.FinalAnswer)
	if res.Answer() != "All done." || res.Usage.OutputTokens != 3 {
		t.Errorf("answer %q, usage %+v; want the complete turn", res.Answer(), res.Usage)
	}
}
