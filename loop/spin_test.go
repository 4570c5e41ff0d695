package loop_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

// byStep is a model that answers turn n with turn(n): call IDs can differ
// from turn to turn while the calls stay the same.
func byStep(turn func(step int) llmtest.Turn) llm.Model {
	return llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		t := turn(req.Step)
		if t.Response == nil {
			return nil, fmt.Errorf("no turn %d", req.Step)
		}
		r := *t.Response
		return &r, nil
	})
}

type mailIn struct {
	To string `json:"to"`
}

// mailer is a write tool without a business key: each call gets its own
// idempotency key (run ID and call ID), so the ledger never replays one.
// It fails as a mail server that is briefly down does, with a message that
// changes from attempt to attempt when distinct is set.
func mailer(sent *atomic.Int32, distinct bool) *tool.Tool {
	return tool.MustNew(tool.Spec[mailIn]{Name: "send_mail", Effect: tool.Write},
		func(_ context.Context, in mailIn) (string, error) {
			n := sent.Add(1)
			msg := "mail server busy"
			if distinct {
				msg = fmt.Sprintf("mail server busy (attempt %d)", n)
			}
			return "", tool.Unavailable(fmt.Errorf("%s", msg))
		})
}

func spinConfig(t *testing.T, model llm.Model, extra ...*tool.Tool) loop.Config {
	t.Helper()
	f := newFixture(t, extra...)
	return loop.Config{Model: model, Tools: f.reg, Budgets: loop.Budgets{MaxSteps: 12},
		Executor: executor.New(&executor.Options{MaxRetries: -1})}
}

// The same failing write without a business key, asked for turn after
// turn under new call IDs, is a repeat like a read's: spin_detected on the
// second request, not max_steps_exceeded at the twelfth.
func TestUnkeyedWriteRepeatedIsASpin(t *testing.T) {
	var sent atomic.Int32
	model := byStep(func(n int) llmtest.Turn {
		return llmtest.Calls(call(fmt.Sprintf("c%d", n), "send_mail", `{"to":"ada@example.com"}`))
	})
	res, err := loop.Run(context.Background(), spinConfig(t, model, mailer(&sent, true)), user("mail Ada"))
	mustStatus(t, res, err, loop.SpinDetected)
	if res.Steps != 2 || sent.Load() != 1 || !strings.Contains(res.Detail, "same arguments as call c1 of the previous turn") {
		t.Fatalf("steps %d, %d sends, detail %q", res.Steps, sent.Load(), res.Detail)
	}
}

// Asked for every other turn, the same write is a spin on its third
// request, whatever its idempotency keys.
func TestUnkeyedWriteAskedThriceIsASpin(t *testing.T) {
	var sent atomic.Int32
	model := byStep(func(n int) llmtest.Turn {
		id := fmt.Sprintf("c%d", n)
		if n%2 == 0 {
			return llmtest.Calls(call(id, "query_order", fmt.Sprintf(`{"id":"A%d"}`, n)))
		}
		return llmtest.Calls(call(id, "send_mail", `{"to":"ada@example.com"}`))
	})
	res, err := loop.Run(context.Background(), spinConfig(t, model, mailer(&sent, true)), user("mail Ada"))
	mustStatus(t, res, err, loop.SpinDetected)
	if res.Steps != 5 || sent.Load() != 2 || !strings.Contains(res.Detail, "third time") {
		t.Fatalf("steps %d, %d sends, detail %q", res.Steps, sent.Load(), res.Detail)
	}
}

// A model that goes back and forth between two look-ups learns nothing
// after the first two turns: once two turns in a row have only repeated
// results it had already seen, asking for more is a spin.
func TestNoNewInformationIsASpin(t *testing.T) {
	model := byStep(func(n int) llmtest.Turn {
		return llmtest.Calls(call(fmt.Sprintf("c%d", n), "query_order", fmt.Sprintf(`{"id":"A%d"}`, 2-n%2)))
	})
	res, err := loop.Run(context.Background(), spinConfig(t, model), user("where are A1 and A2?"))
	mustStatus(t, res, err, loop.SpinDetected)
	if res.Steps != 5 || !strings.Contains(res.Detail, "no new information") || !strings.Contains(res.Detail, "turns 3 to 4") {
		t.Fatalf("steps %d, detail %q", res.Steps, res.Detail)
	}
}

// The same answer to different questions is no news either: a model that
// keeps rewording a search that finds nothing is stopped.
func TestSameResultForOtherArgumentsIsNoNews(t *testing.T) {
	type searchIn struct {
		Q string `json:"q"`
	}
	search := tool.MustNew(tool.Spec[searchIn]{Name: "search_orders"},
		func(context.Context, searchIn) ([]string, error) { return []string{}, nil })
	model := byStep(func(n int) llmtest.Turn {
		return llmtest.Calls(call(fmt.Sprintf("c%d", n), "search_orders", fmt.Sprintf(`{"q":"grace %d"}`, n)))
	})
	res, err := loop.Run(context.Background(), spinConfig(t, model, search), user("find Grace's order"))
	mustStatus(t, res, err, loop.SpinDetected)
	if res.Steps != 4 || !strings.Contains(res.Detail, "no new information") {
		t.Fatalf("steps %d, detail %q", res.Steps, res.Detail)
	}
}

// The rule stops a model that asks for more, not one that answers with
// what it has, nor one whose turns bring something new.
func TestNoNewInformationLetsTheModelAnswer(t *testing.T) {
	ids := []string{"A1", "A2", "A1", "A2"}
	model := byStep(func(n int) llmtest.Turn {
		if n > len(ids) {
			return llmtest.Text("A1 and A2 have shipped")
		}
		return llmtest.Calls(call(fmt.Sprintf("c%d", n), "query_order", fmt.Sprintf(`{"id":%q}`, ids[n-1])))
	})
	res, err := loop.Run(context.Background(), spinConfig(t, model), user("where are A1 and A2?"))
	mustStatus(t, res, err, loop.FinalAnswer)

	// A new result between repeats starts the count again.
	ids = []string{"A1", "A2", "A1", "A3", "A2", "A1"}
	res, err = loop.Run(context.Background(), spinConfig(t, model), user("where are A1, A2 and A3?"))
	mustStatus(t, res, err, loop.FinalAnswer)
}
