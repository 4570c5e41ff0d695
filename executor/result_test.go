package executor_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/store"
	"github.com/toolloop/toolloop/tool"
)

// rawTool is a raw tool whose handler returns out, with the given cap.
func rawTool(t *testing.T, out string, limit int) *tool.Tool {
	t.Helper()
	tl, err := tool.NewRaw(tool.Definition{Name: "big", InputSchema: json.RawMessage(`{"type":"object"}`), MaxResultBytes: limit},
		func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(out), nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// A result past its cap reaches the model as its head in an object that
// says how long it was, within the cap, and the outcome records the cut.
func TestResultCap(t *testing.T) {
	// Quotes and a character of several bytes, so that escaping lengthens
	// the head and a cut could fall inside a character.
	b, _ := json.Marshal(strings.Repeat(`a"é`, 100_000))
	big := string(b)
	for _, c := range []struct {
		name      string
		toolCap   int
		opts      executor.Options
		wantLimit int
	}{
		{"executor default", 0, executor.Options{}, 64 << 10},
		{"executor option", 0, executor.Options{MaxResultBytes: 1000}, 1000},
		{"tool's own cap wins", 500, executor.Options{MaxResultBytes: 1000}, 500},
	} {
		t.Run(c.name, func(t *testing.T) {
			ex := executor.New(&c.opts)
			tl := rawTool(t, big, c.toolCap)
			o := ex.Run(context.Background(), executor.Call{Call: llm.ToolCall{ID: "c1", Name: "big", Arguments: json.RawMessage(`{}`)}, Tool: tl})
			if o.Result.Status != llm.StatusOK {
				t.Fatalf("outcome %+v", o)
			}
			content := o.Result.Content
			if len(content) > c.wantLimit || len(content) < c.wantLimit-16 {
				t.Fatalf("content is %d bytes, want just under %d", len(content), c.wantLimit)
			}
			var v struct {
				Truncated bool   `json:"truncated"`
				Bytes     int    `json:"bytes"`
				Head      string `json:"head"`
			}
			if err := json.Unmarshal(content, &v); err != nil {
				t.Fatalf("content is not the cut object: %v", err)
			}
			if !v.Truncated || v.Bytes != len(big) || !strings.HasPrefix(big, v.Head) || !utf8.ValidString(v.Head) || v.Head == "" {
				t.Fatalf("cut object: truncated %v bytes %d head %q...", v.Truncated, v.Bytes, v.Head[:min(20, len(v.Head))])
			}
			if o.CutBytes != len(big)-len(v.Head) {
				t.Fatalf("Attempts = %d, want %d", o.CutBytes, len(big)-len(v.Head))
			}
		})
	}
	// Under the cap, or with no cap, the result is as the tool gave it.
	for _, c := range []struct {
		toolCap int
		opts    executor.Options
	}{{0, executor.Options{MaxResultBytes: len(big)}}, {-1, executor.Options{MaxResultBytes: 10}}, {0, executor.Options{MaxResultBytes: -1}}} {
		o := executor.New(&c.opts).Run(context.Background(), executor.Call{Call: llm.ToolCall{ID: "c1", Name: "big"}, Tool: rawTool(t, big, c.toolCap)})
		if string(o.Result.Content) != big || o.CutBytes != 0 {
			t.Errorf("cap %d/%d: content cut (%d bytes, Attempts %d)", c.toolCap, c.opts.MaxResultBytes, len(o.Result.Content), o.CutBytes)
		}
	}
}

// lostAnswer is a write that happens and whose answer is lost.
func lostAnswer(t *testing.T, s *shop, withLookup bool) *tool.Tool {
	t.Helper()
	spec := tool.Spec[refundArgs]{Name: "refund", Effect: tool.Write,
		IdempotencyKey: func(in refundArgs) string { return "refund:" + in.OrderID }}
	if withLookup {
		spec.Lookup = s.lookup
	}
	tl, err := tool.New(spec, func(ctx context.Context, in refundArgs) (refundResult, error) {
		if _, err := s.refund(ctx, in); err != nil {
			return refundResult{}, err
		}
		return refundResult{}, tool.OutcomeUnknown(context.DeadlineExceeded)
	})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// A write whose handler reports that its outcome is unknown is neither
// retried nor handed back as a plain failure: without a status look-up the
// run stops and the key stays in flight; with one, the look-up settles it.
func TestOutcomeUnknownWrite(t *testing.T) {
	forEach(t, func(t *testing.T, l store.Ledger, run func(*executor.Executor, executor.Call) executor.Outcome) {
		s := newShop(t, refundOK)
		ex := executor.New(&executor.Options{Ledger: l})
		o := run(ex, refundCall("c1", lostAnswer(t, s, false), "A1"))
		if !o.OutcomeUnknown || !o.StopRun || o.Result.ErrorKind != llm.KindOutcomeUnknown || o.Attempts != 1 {
			t.Fatalf("outcome = %+v", o)
		}
		if rec, _ := record(t, l, "refund:A1"); rec.State != store.InFlight {
			t.Fatalf("record = %+v, want the key kept in flight", rec)
		}
		if s.execs.Load() != 1 {
			t.Fatalf("handler ran %d times, want once", s.execs.Load())
		}

		o = run(ex, refundCall("c2", lostAnswer(t, s, true), "B2"))
		if !o.Reconciled || o.Result.Status != llm.StatusOK || o.OutcomeUnknown || o.StopRun {
			t.Fatalf("with a look-up: outcome = %+v", o)
		}
	})
	// Without a ledger key the write cannot be settled either.
	s := newShop(t, refundOK)
	tl := lostAnswer(t, s, false)
	c := refundCall("c1", tl, "A1")
	c.IdempotencyKey = ""
	o := executor.New(nil).Run(context.Background(), c)
	if !o.OutcomeUnknown || !o.StopRun || s.execs.Load() != 1 {
		t.Fatalf("unguarded: outcome = %+v, execs %d", o, s.execs.Load())
	}
}

// A result nested deeper than a log can read back is kept as a string:
// the outcome still encodes and decodes to the same content.
func TestDeepResultIsKeptAsAString(t *testing.T) {
	deep := strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000)
	ex := executor.New(nil)
	o := ex.Run(context.Background(), executor.Call{Call: llm.ToolCall{ID: "c1", Name: "big", Arguments: json.RawMessage(`{}`)}, Tool: rawTool(t, deep, 0)})
	var s string
	if o.Result.Status != llm.StatusOK || json.Unmarshal(o.Result.Content, &s) != nil || s != deep {
		t.Fatalf("outcome %s %.40s, want the result as a string", o.Result.Status, o.Result.Content)
	}
	data, err := json.Marshal(struct{ Outcomes []executor.Outcome }{[]executor.Outcome{o}})
	if err != nil {
		t.Fatal(err)
	}
	var back struct{ Outcomes []executor.Outcome }
	if err := json.Unmarshal(data, &back); err != nil || string(back.Outcomes[0].Result.Content) != string(o.Result.Content) {
		t.Fatalf("the outcome does not round-trip: %v", err)
	}
}
