package llmtest_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
)

// A streamed turn assembles into exactly the response Generate returns
// for it, for text, parallel calls with provider state, and reasoning
// with usage; and it comes in several pieces, calls interleaved.
func TestStreamAssemblesWhatGenerateReturns(t *testing.T) {
	st := &llm.ProviderState{Provider: "p", Data: []byte{7}}
	calls := llmtest.Calls(
		llmtest.Call("c1", "get_order", map[string]string{"order_id": "A100"}),
		llm.ToolCall{ID: "c2", Name: "refund", Arguments: []byte(`{"order_id":"A101","amount":12.5}`), State: st},
	).WithUsage(120, 30)
	calls.Response.Message.Text = "Let me look: ünïcödé."
	reasoning := llmtest.Text("The order shipped yesterday.").WithUsage(50, 20)
	reasoning.Response.Message.Reasoning = []llm.Reasoning{{Provider: "p", Text: "they ask where it is"}, {Provider: "p", Hidden: true}}
	reasoning.Response.Message.State = st
	reasoning.Response.ID, reasoning.Response.Model, reasoning.Response.Truncated = "r1", "m", true
	for name, turn := range map[string]llm.Response{"calls": *calls.Response, "reasoning": *reasoning.Response} {
		t.Run(name, func(t *testing.T) {
			tn := llmtest.Turn{Response: &turn}
			want, err := llmtest.New(tn).Generate(context.Background(), req(1))
			if err != nil {
				t.Fatal(err)
			}
			m := llmtest.New(tn)
			var ds []llm.Delta
			got, err := llm.Collect(func(yield func(llm.Delta, error) bool) {
				for d, err := range m.Stream(context.Background(), req(1)) {
					ds = append(ds, d)
					if !yield(d, err) {
						return
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("streamed\n%+v\nwant\n%+v", got, want)
			}
			if len(m.Requests()) != 1 {
				t.Errorf("%d requests recorded, want 1", len(m.Requests()))
			}
			texts := 0
			for _, d := range ds {
				if d.Kind == llm.DeltaText {
					texts++
				}
			}
			if msg := want.Message; msg.Text != "" && texts < 2 {
				t.Errorf("%q came in %d text delta(s), want several", msg.Text, texts)
			}
			if name == "calls" {
				// Call 1 starts before call 0's arguments are complete.
				var kinds []llm.DeltaKind
				for _, d := range ds {
					if d.Kind >= llm.DeltaToolCallStart && d.Kind <= llm.DeltaToolCallEnd {
						kinds = append(kinds, d.Kind)
					}
				}
				if len(kinds) < 3 || kinds[0] != llm.DeltaToolCallStart || kinds[1] != llm.DeltaToolCallArguments || kinds[2] != llm.DeltaToolCallStart {
					t.Errorf("call deltas %v, want them interleaved (start 0, arguments 0, start 1, ...)", kinds)
				}
			}
		})
	}
}

// BreakAfter fails the stream before its first delta or part-way; a
// turn's error and an exhausted script fail it before the first delta.
func TestStreamFailures(t *testing.T) {
	boom := &llm.Error{Kind: llm.KindUnavailable, Retryable: true, Err: llm.ErrStreamEnded}
	ctx := context.Background()
	m := llmtest.New(llmtest.Text("hello there, friend").BreakAfter(0, boom), llmtest.Text("hello there, friend").BreakAfter(2, boom),
		llmtest.Turn{Err: boom})
	if resp, err := llm.Collect(m.Stream(ctx, req(1))); resp != nil || !errors.Is(err, llm.ErrStreamEnded) {
		t.Errorf("broken before the first delta: %+v, %v; want no response and the error", resp, err)
	}
	resp, err := llm.Collect(m.Stream(ctx, req(2)))
	if !errors.Is(err, llm.ErrStreamEnded) || resp == nil || resp.Message.Text != "hello there, fri" {
		t.Errorf("broken after two deltas: %+v, %v; want two pieces of text and the error", resp, err)
	}
	if resp, err := llm.Collect(m.Stream(ctx, req(3))); resp != nil || !errors.Is(err, llm.ErrStreamEnded) {
		t.Errorf("an error turn: %+v, %v; want the error before any delta", resp, err)
	}
	if _, err := llm.Collect(m.Stream(ctx, req(4))); !errors.Is(err, llmtest.ErrScriptExhausted) {
		t.Errorf("past the script: %v, want ErrScriptExhausted", err)
	}
	if n := m.Abandoned(); n != 0 {
		t.Errorf("Abandoned() = %d after streams that failed on their own, want 0", n)
	}
	// Generate is not affected by BreakAfter.
	if r, err := llmtest.New(llmtest.Text("hi").BreakAfter(0, boom)).Generate(ctx, req(1)); err != nil || r.Message.Text != "hi" {
		t.Errorf("Generate of a broken turn = %+v, %v; want the answer", r, err)
	}
}

// A consumer that stops ranging, or a context that ends part-way, ends
// the stream at once, and Abandoned counts it.
func TestStreamAbandoned(t *testing.T) {
	m := llmtest.New(llmtest.Text("a long answer in many pieces"))
	n := 0
	for range m.Stream(context.Background(), req(1)) {
		if n++; n == 2 {
			break
		}
	}
	if got := m.Abandoned(); got != 1 {
		t.Errorf("Abandoned() = %d after the consumer broke off, want 1", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	paced := llmtest.Text("a long answer in many pieces")
	paced.OnDelta = func(ctx context.Context, i int) error {
		if i == 2 {
			cancel()
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	m = llmtest.New(paced)
	resp, err := llm.Collect(m.Stream(ctx, req(1)))
	if !errors.Is(err, context.Canceled) || resp == nil || resp.Message.Text != "a long answer in" {
		t.Errorf("canceled after two deltas: %+v, %v; want two pieces and context.Canceled", resp, err)
	}
	if got := m.Abandoned(); got != 1 {
		t.Errorf("Abandoned() = %d after the context ended mid-stream, want 1", got)
	}
}
