package orders_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

// TestMain fails the package when any test leaves a goroutine behind: the
// slow carrier's handler honours its context, so even the timeout and
// deadline scenarios must clean up after themselves.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// run plays the named scenario and fails the test if it cannot be set up.
func run(t *testing.T, name string) (*loop.Result, *orders.Book) {
	t.Helper()
	s, ok := orders.Lookup(name)
	if !ok {
		t.Fatalf("no scenario %q", name)
	}
	res, book, err := s.Run(context.Background())
	if err != nil {
		t.Fatalf("scenario %s: %v", name, err)
	}
	if res == nil || book == nil {
		t.Fatalf("scenario %s: nil result or book", name)
	}
	return res, book
}

// result returns the tool result answering callID, and its index in msgs.
func result(t *testing.T, msgs []llm.Message, callID string) (llm.ToolResult, int) {
	t.Helper()
	for i, m := range msgs {
		if m.Role == llm.RoleTool && m.Result != nil && m.Result.CallID == callID {
			return *m.Result, i
		}
	}
	t.Fatalf("no result for call %s in the history:\n%s", callID, dump(msgs))
	return llm.ToolResult{}, -1
}

// callIndex returns the index of the assistant message that made callID.
func callIndex(msgs []llm.Message, callID string) int {
	for i, m := range msgs {
		for _, c := range m.ToolCalls {
			if c.ID == callID {
				return i
			}
		}
	}
	return -1
}

func dump(msgs []llm.Message) string {
	var b strings.Builder
	for i, m := range msgs {
		j, _ := json.Marshal(m)
		fmt.Fprintf(&b, "  %d %s\n", i, j)
	}
	return b.String()
}

func TestScenarioNames(t *testing.T) {
	want := []string{
		"normal", "unknown_tool", "loop_forever",
		"not_found", "tool_timeout", "deadline_exceeded", "tool_budget_exceeded", "cost_budget_exceeded",
		"spin_detected", "permission_denied", "confirmation_required", "protocol_error", "model_error", "context_exhausted", "canceled", "invalid_output",
		"compensation_failed",
		"parallel", "refund_retry", "refund_twice", "refund_unknown", "refund_reversed",
		"confirm_refund",
	}
	if got := orders.Names(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Names() = %v\nwant      %v", got, want)
	}
	// The default list is everything but the interactive scenarios, which
	// come last.
	var defaults []string
	for _, s := range orders.Defaults() {
		defaults = append(defaults, s.Name)
	}
	if !reflect.DeepEqual(defaults, want[:len(want)-1]) {
		t.Errorf("Defaults() = %v", defaults)
	}
	for _, s := range orders.Scenarios() {
		if s.Interactive != (s.Name == "confirm_refund") {
			t.Errorf("scenario %s: Interactive = %v", s.Name, s.Interactive)
		}
		if got, ok := orders.LookupSession(s.SessionID()); !ok || got.Name != s.Name || s.SessionID() != "demo:"+s.Name {
			t.Errorf("scenario %s: session %q does not lead back to it", s.Name, s.SessionID())
		}
	}
	if _, ok := orders.LookupSession("run:openai:gpt-4.1"); ok {
		t.Error("LookupSession took another session for a scenario's")
	}
	for _, s := range orders.Scenarios() {
		if s.Description == "" || s.Ask == "" || s.Script == nil {
			t.Errorf("scenario %s: Description, Ask and Script are all required", s.Name)
		}
	}
	if _, ok := orders.Lookup("nope"); ok {
		t.Error("Lookup(nope) found a scenario")
	}
}

// wantRefunds is how many refunds each scenario's book ends with; the
// others must end with none. refund_unknown's voucher was applied although
// the run cannot know it: that is why the run stops.
var wantRefunds = map[string]int{"parallel": 1, "refund_retry": 1, "refund_twice": 1, "refund_unknown": 1, "refund_reversed": 1}

// TestScenarios runs every scenario and checks what all of them promise:
// the expected status, a valid history, a log that ends with that status,
// and exactly the refunds the scenario is about (none for the others).
func TestScenarios(t *testing.T) {
	for _, s := range orders.Scenarios() {
		t.Run(s.Name, func(t *testing.T) {
			start := time.Now()
			res, book := run(t, s.Name)
			if res.Status != s.Want {
				t.Fatalf("status %s (%s), want %s\nhistory:\n%s", string(res.Status), res.Detail, string(s.Want), dump(res.Messages))
			}
			if err := llm.CheckHistory(res.Messages); err != nil {
				t.Errorf("history is invalid: %v\n%s", err, dump(res.Messages))
			}
			if res.RunID != "run-"+s.Name {
				t.Errorf("run ID %q, want %q", res.RunID, "run-"+s.Name)
			}
			if n := len(res.Events); n == 0 || res.Events[n-1].Kind != loop.Stopped || res.Events[n-1].Status != s.Want {
				t.Errorf("the log does not end with a stopped event for %s", string(s.Want))
			}
			if err := res.Err(); (err == nil) != (s.Want == loop.FinalAnswer) || (err != nil && !errors.Is(err, s.Want)) {
				t.Errorf("Err() = %v for status %s", err, string(res.Status))
			}
			if n, want := book.TotalRefunds(), wantRefunds[s.Name]; n != want {
				t.Errorf("%d refunds, want %d", n, want)
			}
			// Only refund_reversed takes a refund back, and only once.
			if n, _ := book.ReversalCount(context.Background(), ""); n != map[bool]int{true: 1}[s.Name == "refund_reversed"] {
				t.Errorf("%d reversals", n)
			}
			if s.ShowRefunds != (s.Name == "parallel" || strings.HasPrefix(s.Name, "refund_") || s.Name == "confirm_refund") {
				t.Errorf("ShowRefunds = %v", s.ShowRefunds)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("scenario took %v; the demo must stay quick", d)
			}
		})
	}
}

// TestStatusCoverage checks that the default scenarios reach every status
// exactly once, but final_answer, which six reach. The interactive
// scenario is left out: it is confirmation_required again, on the way to a
// final answer that a person's decision and a resume bring.
func TestStatusCoverage(t *testing.T) {
	count := map[loop.Status]int{}
	for _, s := range orders.Defaults() {
		res, _ := run(t, s.Name)
		count[res.Status]++
	}
	for _, st := range loop.Statuses() {
		want := 1
		if st == loop.FinalAnswer {
			want = 6 // normal, not_found, parallel, refund_retry, refund_twice, refund_reversed
		}
		if count[st] != want {
			t.Errorf("status %s reached by %d scenario(s), want %d", string(st), count[st], want)
		}
		delete(count, st)
	}
	for st, n := range count {
		t.Errorf("status %q (reached %d times) is not in loop.Statuses()", string(st), n)
	}
}

func TestNormal(t *testing.T) {
	res, _ := run(t, "normal")
	if res.Steps != 3 || res.ToolCalls != 2 {
		t.Errorf("steps=%d tool_calls=%d, want 3 and 2", res.Steps, res.ToolCalls)
	}
	for _, id := range []string{"call_q1", "call_t1"} {
		r, at := result(t, res.Messages, id)
		if r.Status != llm.StatusOK {
			t.Errorf("call %s: status %s, want ok: %s", id, r.Status, r.Content)
		}
		if c := callIndex(res.Messages, id); c < 0 || c >= at {
			t.Errorf("call %s made at message %d, answered at %d", id, c, at)
		}
	}
	q, _ := result(t, res.Messages, "call_q1")
	var o orders.Order
	if err := json.Unmarshal(q.Content, &o); err != nil || o.ID != "A100" || o.Carrier != "DHL" {
		t.Errorf("query_order result %s (%v)", q.Content, err)
	}
	if !strings.Contains(res.Answer(), "A100") {
		t.Errorf("answer %q does not name the order", res.Answer())
	}
}

func TestNotFound(t *testing.T) {
	res, _ := run(t, "not_found")
	r, at := result(t, res.Messages, "call_q1")
	if r.Status != llm.StatusError || r.ErrorKind != llm.KindNotFound {
		t.Fatalf("result %+v, want an error of kind not_found", r)
	}
	if r.Name != orders.QueryOrder || !strings.Contains(string(r.Content), "no order A999") {
		t.Errorf("result %s %s, want query_order saying no order A999", r.Name, r.Content)
	}
	if c := callIndex(res.Messages, "call_q1"); c < 0 || c >= at {
		t.Errorf("call made at message %d, answered at %d", c, at)
	}
	// The model saw the error before it answered.
	if last := res.Messages[len(res.Messages)-1]; last.Role != llm.RoleAssistant || at != len(res.Messages)-2 {
		t.Errorf("the not_found result is not what the final answer follows:\n%s", dump(res.Messages))
	}
}

func TestUnknownTool(t *testing.T) {
	res, _ := run(t, "unknown_tool")
	r, _ := result(t, res.Messages, "call_d1")
	if r.ErrorKind != llm.KindToolNotAllowed {
		t.Errorf("result kind %s, want tool_not_allowed", r.ErrorKind)
	}
}

func TestLoopForever(t *testing.T) {
	res, _ := run(t, "loop_forever")
	if res.Steps != 5 {
		t.Errorf("steps %d, want MaxSteps 5", res.Steps)
	}
	// Pages 1 to 4 ran; page 5 came on the last turn and was skipped.
	for page := 1; page <= 5; page++ {
		r, _ := result(t, res.Messages, fmt.Sprintf("call_l%d", page))
		want := llm.StatusOK
		if page == 5 {
			want = llm.StatusSkipped
		}
		if r.Status != want {
			t.Errorf("page %d: status %s, want %s", page, r.Status, want)
		}
	}
}

func TestToolTimeout(t *testing.T) {
	res, _ := run(t, "tool_timeout")
	r, _ := result(t, res.Messages, "call_t1")
	if r.Status != llm.StatusError || r.ErrorKind != llm.KindTimeout {
		t.Errorf("result %+v, want an error of kind timeout", r)
	}
}

func TestDeadlineExceeded(t *testing.T) {
	res, _ := run(t, "deadline_exceeded")
	r, _ := result(t, res.Messages, "call_t1")
	// The run's deadline cut the call short; that is not the tool's timeout.
	if r.ErrorKind == llm.KindTimeout || r.Status == llm.StatusOK {
		t.Errorf("result %+v: the deadline, not a tool timeout, must end the call", r)
	}
}

func TestToolBudgetExceeded(t *testing.T) {
	res, _ := run(t, "tool_budget_exceeded")
	for _, id := range []string{"call_q1", "call_q2", "call_q3"} {
		if r, _ := result(t, res.Messages, id); r.Status != llm.StatusSkipped {
			t.Errorf("call %s: status %s, want skipped", id, r.Status)
		}
	}
}

func TestCostBudgetExceeded(t *testing.T) {
	res, _ := run(t, "cost_budget_exceeded")
	if got := res.Usage.Total(); got != 1190 {
		t.Errorf("usage %d tokens, want 1190", got)
	}
}

func TestPermissionDenied(t *testing.T) {
	res, book := run(t, "permission_denied")
	r, _ := result(t, res.Messages, "call_r1")
	if r.ErrorKind != llm.KindPermissionDenied {
		t.Errorf("refund result kind %s, want permission_denied", r.ErrorKind)
	}
	if n := book.Refunds("A103"); n != 0 {
		t.Errorf("A103 refunded %d times, want 0", n)
	}
}

func TestConfirmationRequired(t *testing.T) {
	res, book := run(t, "confirmation_required")
	if n := book.Refunds("A103"); n != 0 {
		t.Errorf("A103 refunded %d times before anyone confirmed", n)
	}
	if len(res.Pending) != 1 || res.Pending[0].CallID != "call_r1" || res.Pending[0].Tool != orders.RefundOrder {
		t.Errorf("pending %+v, want call_r1 (refund_order)", res.Pending)
	}
	r, _ := result(t, res.Messages, "call_r1")
	if r.Status != llm.StatusSkipped || r.ErrorKind != llm.KindAwaitingConfirmation {
		t.Errorf("refund result %+v, want skipped awaiting_confirmation", r)
	}
	if !res.Status.Resumable() {
		t.Error("confirmation_required must be resumable")
	}
}

func TestProtocolError(t *testing.T) {
	res, _ := run(t, "protocol_error")
	// The malformed response never enters the history.
	if i := callIndex(res.Messages, "call_1"); i >= 0 {
		t.Errorf("the response with duplicate call IDs is in the history at %d", i)
	}
}

func TestModelError(t *testing.T) {
	res, _ := run(t, "model_error")
	var attempts int
	for _, ev := range res.Events {
		if ev.Kind == loop.ModelFailed {
			attempts = ev.Attempts
		}
	}
	if attempts != 3 {
		t.Errorf("the model was tried %d times, want 3 (one try and two retries)", attempts)
	}
}

func TestCanceled(t *testing.T) {
	res, _ := run(t, "canceled")
	if r, _ := result(t, res.Messages, "call_q1"); r.Status != llm.StatusOK {
		t.Errorf("call_q1 status %s, want ok", r.Status)
	}
	if r, _ := result(t, res.Messages, "call_t1"); r.Status != llm.StatusSkipped {
		t.Errorf("call_t1 status %s, want skipped: the run was canceled before it ran", r.Status)
	}
}

func TestScenarioCanceledByCaller(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s, _ := orders.Lookup("normal")
	res, _, err := s.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != loop.Canceled {
		t.Errorf("status %s, want canceled", string(res.Status))
	}
}

func TestScenarioWithoutScript(t *testing.T) {
	res, book, err := orders.Scenario{Name: "empty"}.Run(context.Background())
	if err == nil || res != nil || book != nil {
		t.Errorf("Run() = %v, %v, %v; want an error", res, book, err)
	}
}

// TestDeterministic runs every scenario twice and compares the histories.
func TestDeterministic(t *testing.T) {
	for _, s := range orders.Scenarios() {
		a, _ := run(t, s.Name)
		b, _ := run(t, s.Name)
		ja, _ := json.Marshal(a.Messages)
		jb, _ := json.Marshal(b.Messages)
		if string(ja) != string(jb) || a.Status != b.Status || a.Detail != b.Detail {
			t.Errorf("scenario %s differs between runs:\n%s\n%s", s.Name, ja, jb)
		}
	}
}

func TestBookRefund(t *testing.T) {
	b := orders.NewBook()
	r, err := b.Refund(context.Background(), "A103", "broken")
	if err != nil {
		t.Fatal(err)
	}
	if r.AmountCents != 6400 || r.OrderID != "A103" || r.RefundID == "" {
		t.Errorf("refund %+v", r)
	}
	if _, err := b.Refund(context.Background(), "A103", "again"); tool.KindOf(err) != llm.KindInvalidArguments {
		t.Errorf("second refund: %v, want invalid_arguments", err)
	}
	if _, err := b.Refund(context.Background(), "A102", ""); tool.KindOf(err) != llm.KindInvalidArguments {
		t.Errorf("refund of an unshipped order: %v, want invalid_arguments", err)
	}
	if _, err := b.Refund(context.Background(), "A999", ""); tool.KindOf(err) != llm.KindNotFound || !strings.Contains(err.Error(), "no order A999") {
		t.Errorf("refund of A999: %v, want not_found", err)
	}
	if b.Refunds("A103") != 1 || b.TotalRefunds() != 1 {
		t.Errorf("refunds A103=%d total=%d, want 1 and 1", b.Refunds("A103"), b.TotalRefunds())
	}
	o, _ := b.Order(context.Background(), "A103")
	if o.Status != orders.StatusRefunded || o.RefundedCents != 6400 {
		t.Errorf("order after refund: %+v", o)
	}
}

func TestBookConcurrentRefunds(t *testing.T) {
	b := orders.NewBook()
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for range 16 {
		wg.Go(func() {
			if _, err := b.Refund(context.Background(), "A101", "race"); err == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
			_, _ = b.Orders(context.Background())
		})
	}
	wg.Wait()
	if ok != 1 || b.Refunds("A101") != 1 {
		t.Errorf("%d refunds succeeded, book counts %d; want exactly one", ok, b.Refunds("A101"))
	}
}

func TestBookCancel(t *testing.T) {
	b := orders.NewBook()
	if _, err := b.Cancel(context.Background(), "A100"); tool.KindOf(err) != llm.KindInvalidArguments {
		t.Errorf("cancel of a shipped order: %v", err)
	}
	o, err := b.Cancel(context.Background(), "A102")
	if err != nil || o.Status != orders.StatusCancelled || b.Cancels("A102") != 1 {
		t.Errorf("cancel A102: %+v %v", o, err)
	}
}

func TestBookCopies(t *testing.T) {
	b := orders.NewBook()
	o, _ := b.Order(context.Background(), "A100")
	o.Items[0].Name = "changed"
	again, _ := b.Order(context.Background(), "A100")
	if again.Items[0].Name == "changed" {
		t.Error("Order returned the book's own item slice")
	}
}

func TestTrackHonoursContext(t *testing.T) {
	b := orders.NewBook()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := b.Track(ctx, "A104")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Errorf("Track(A104) = %v after %v; want the context's error, quickly", err, time.Since(start))
	}
	sh, err := b.Track(context.Background(), "A100")
	if err != nil || sh.Carrier != "DHL" || sh.State != "in_transit" {
		t.Errorf("Track(A100) = %+v, %v", sh, err)
	}
	if _, err := b.Track(context.Background(), "A102"); tool.KindOf(err) != llm.KindNotFound {
		t.Errorf("Track(A102), not shipped: %v, want not_found", err)
	}
}

func TestTools(t *testing.T) {
	reg, err := orders.Tools(orders.NewBook())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]tool.Effect{
		orders.QueryOrder: tool.ReadOnly, orders.TrackShipment: tool.ReadOnly, orders.ListOrders: tool.ReadOnly,
		orders.RefundOrder: tool.Write, orders.CancelOrder: tool.Write, orders.IssueVoucher: tool.Write,
		orders.ReverseRefund: tool.Write,
	}
	if len(reg.Names()) != len(want) {
		t.Errorf("tools %v", reg.Names())
	}
	for name, eff := range want {
		tl, ok := reg.Lookup(name)
		if !ok {
			t.Errorf("no tool %s", name)
			continue
		}
		if tl.Effect() != eff {
			t.Errorf("%s: effect %s, want %s", name, tl.Effect(), eff)
		}
		if tl.Definition().Description == "" {
			t.Errorf("%s has no description", name)
		}
	}
	track, _ := reg.Lookup(orders.TrackShipment)
	if track.Timeout() != orders.TrackTimeout || track.OnTimeout() != tool.TimeoutStop {
		t.Errorf("track_shipment timeout %v/%s", track.Timeout(), track.OnTimeout())
	}
	refund, _ := reg.Lookup(orders.RefundOrder)
	if got := refund.Resources(json.RawMessage(`{"order_id":"A103"}`)); !reflect.DeepEqual(got, []string{"order:A103"}) {
		t.Errorf("refund_order resources %v", got)
	}
	query, _ := reg.Lookup(orders.QueryOrder)
	if _, err := query.Call(context.Background(), json.RawMessage(`{}`)); tool.KindOf(err) != llm.KindInvalidArguments {
		t.Errorf("query_order without order_id: %v, want invalid_arguments", err)
	}
	if _, err := query.Call(context.Background(), json.RawMessage(`{"order_id":" "}`)); tool.KindOf(err) != llm.KindInvalidArguments {
		t.Errorf("query_order with a blank order_id: %v, want invalid_arguments", err)
	}
	if _, err := orders.Tools(nil); err == nil {
		t.Error("Tools(nil) succeeded")
	}
}

func TestListOrdersPages(t *testing.T) {
	reg, _ := orders.Tools(orders.NewBook())
	list, _ := reg.Lookup(orders.ListOrders)
	type page struct {
		Page   int `json:"page"`
		Orders []struct {
			ID string `json:"id"`
		} `json:"orders"`
		More bool `json:"more"`
	}
	get := func(args string) (page, error) {
		out, err := list.Call(context.Background(), json.RawMessage(args))
		var p page
		if err == nil {
			err = json.Unmarshal(out, &p)
		}
		return p, err
	}
	var ids []string
	for n := 1; ; n++ {
		p, err := get(fmt.Sprintf(`{"page":%d}`, n))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range p.Orders {
			ids = append(ids, o.ID)
		}
		if !p.More {
			break
		}
	}
	if want := []string{"A100", "A101", "A102", "A103", "A104", "A105"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("paged through %v, want %v", ids, want)
	}
	if p, err := get(`{}`); err != nil || p.Page != 1 || len(p.Orders) != orders.PageSize {
		t.Errorf("default page: %+v %v", p, err)
	}
	if p, err := get(`{"page":9223372036854775807}`); err != nil || len(p.Orders) != 0 || p.More {
		t.Errorf("last possible page: %+v %v", p, err)
	}
	if _, err := get(`{"page":-1}`); tool.KindOf(err) != llm.KindInvalidArguments {
		t.Errorf("page -1: %v, want invalid_arguments", err)
	}
	if _, err := get(`{"page":"two"}`); tool.KindOf(err) != llm.KindInvalidArguments {
		t.Errorf("page \"two\": %v, want invalid_arguments", err)
	}
}

// TestRefundReversed: the refund of A103 is reversed once, the order is as
// before, the model is told before it answers, and the result says the
// writes were undone.
func TestRefundReversed(t *testing.T) {
	res, book := run(t, "refund_reversed")
	ctx := context.Background()
	o, err := book.Order(ctx, "A103")
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != orders.StatusDelivered || o.RefundedCents != 0 {
		t.Errorf("A103 is %s with %d cents refunded; want delivered with none", o.Status, o.RefundedCents)
	}
	rv, ok, err := book.ReversalOf(ctx, "R-A103-1")
	if err != nil || !ok || rv.AmountCents != 6400 || rv.Reason != "the rest of the request failed" {
		t.Errorf("reversal of R-A103-1 = %+v, %v, %v", rv, ok, err)
	}
	w := res.Writes
	if w == nil || w.Outcome != loop.WritesUndone {
		t.Fatalf("writes = %+v; want undone", w)
	}
	if got, want := w.Summary(), "undone: undone refund_order call_r1; not done issue_voucher call_v1 (failed)"; got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
	told := false
	for _, m := range res.Messages {
		told = told || (m.Role == llm.RoleUser && strings.Contains(m.Text, "refund_order call_r1 by reverse_refund"))
	}
	if !told {
		t.Errorf("the model was not told about the reversal:\n%s", dump(res.Messages))
	}
	// A second reversal of the same refund is refused by the book.
	if _, err := book.ReverseRefund(ctx, "R-A103-1", "again"); err == nil {
		t.Error("the book reversed R-A103-1 twice")
	}
}

// TestCompensationFailedNamesWhatIsLeft: the cancellation cannot be
// undone; the stop says so, and the voucher was never issued.
func TestCompensationFailedNamesWhatIsLeft(t *testing.T) {
	res, book := run(t, "compensation_failed")
	if !strings.Contains(res.Detail, "left for a person: cancel_order call_c1") ||
		!strings.Contains(res.Detail, "no compensation is declared for cancel_order") {
		t.Errorf("detail %q does not name the cancellation left for a person", res.Detail)
	}
	if book.Cancels("A102") != 1 || book.TotalRefunds() != 0 {
		t.Errorf("cancels %d, refunds %d; want 1 and 0", book.Cancels("A102"), book.TotalRefunds())
	}
	if res.Writes == nil || res.Writes.Outcome != loop.WritesPartial {
		t.Errorf("writes = %+v; want partial", res.Writes)
	}
}
