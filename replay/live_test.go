package replay_test

import (
	"context"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/replay"
)

// liveConfig replays with model answering for real.
func liveConfig(t testing.TB, model llm.Model) replay.Config {
	return replay.Config{Tools: sandboxTools(t), Model: model}
}

func ref(id string) map[string]string { return map[string]string{"order_id": id} }

// TestLiveModelSame: a live model that asks for the recorded calls, under
// other call IDs, gets the recorded results and ends the same way.
func TestLiveModelSame(t *testing.T) {
	model := llmtest.New(
		llmtest.Calls(llmtest.Call("x1", orders.QueryOrder, `{ "order_id": "A100" }`)).WithUsage(100, 10),
		llmtest.Calls(llmtest.Call("x2", orders.TrackShipment, ref("A100"))).WithUsage(200, 10),
		llmtest.Text("On its way with DHL.").WithUsage(300, 10),
	)
	rep, err := replay.Run(context.Background(), readLog(t, "normal"), liveConfig(t, model))
	if err != nil {
		t.Fatal(err)
	}
	text := format(rep)
	if !rep.Equal() || rep.Live == nil || !rep.Live.SameStatus || !rep.Live.SameCalls || rep.Live.NewTokens != 630 || rep.Live.RecordedTokens != 0 {
		t.Fatalf("want the same status and calls, 630 tokens new:\n%s", text)
	}
	// The recorded results went back under the new IDs.
	var results []string
	for _, m := range loop.Replay(rep.Events).History() {
		if m.Result != nil {
			results = append(results, m.Result.CallID)
		}
	}
	if strings.Join(results, ",") != "x1,x2" {
		t.Errorf("results by call ID: %q", results)
	}
	if !strings.Contains(text, "run run-normal (live model): the same status and calls") || !strings.Contains(text, "tokens:  recorded 0, new 630") {
		t.Errorf("report:\n%s", text)
	}
}

// TestLiveModelOtherCalls: a live model that answers at once has the same
// status and other calls; one that asks for a call never recorded stops
// the replay there, or with live tools runs it on a fresh book.
func TestLiveModelOtherCalls(t *testing.T) {
	rep, err := replay.Run(context.Background(), readLog(t, "normal"), liveConfig(t, llmtest.New(llmtest.Text("No idea."))))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Equal() || !rep.Live.SameStatus || rep.Live.SameCalls || len(rep.Live.NewCalls) != 0 || len(rep.Live.RecordedCalls) != 2 {
		t.Fatalf("answer at once:\n%s", format(rep))
	}
	if !strings.Contains(format(rep), `recorded query_order({"order_id":"A100"}), track_shipment({"order_id":"A100"})`) {
		t.Errorf("report does not list the recorded calls:\n%s", format(rep))
	}

	other := func() llm.Model {
		return llmtest.New(llmtest.Calls(llmtest.Call("y1", orders.QueryOrder, ref("A101"))), llmtest.Text("A101 was delivered."))
	}
	rep, err = replay.Run(context.Background(), readLog(t, "normal"), liveConfig(t, other()))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Equal() || rep.Gap == nil || rep.Gap.CallID != "y1" || !strings.Contains(rep.Gap.Reason, `{"order_id":"A101"}, which no recorded call had`) {
		t.Fatalf("a call never recorded:\n%s", format(rep))
	}
	cfg := liveConfig(t, other())
	cfg.LiveTools = true
	rep, err = replay.Run(context.Background(), readLog(t, "normal"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Gap != nil || rep.NewStatus != loop.FinalAnswer || len(rep.LiveCalls) != 1 || !rep.Live.SameStatus || rep.Live.SameCalls {
		t.Fatalf("with live tools:\n%s", format(rep))
	}
}

// TestLiveModelPrompt: a new system prompt goes to the live model in
// place of the recorded one; without a live model it is refused.
func TestLiveModelPrompt(t *testing.T) {
	var seen string
	model := llm.ModelFunc(func(_ context.Context, req *llm.Request) (*llm.Response, error) {
		seen = req.Messages[0].Text
		return llmtest.Text("Hello.").Response, nil
	})
	cfg := liveConfig(t, model)
	cfg.System = "Be brief."
	if _, err := replay.Run(context.Background(), readLog(t, "normal"), cfg); err != nil {
		t.Fatal(err)
	}
	if seen != "Be brief." {
		t.Errorf("the model saw system prompt %q", seen)
	}
	cfg.Model = nil
	if _, err := replay.Run(context.Background(), readLog(t, "normal"), cfg); err == nil || !strings.Contains(err.Error(), "needs a live model") {
		t.Errorf("a new prompt without a live model: err = %v", err)
	}
}
