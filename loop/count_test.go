package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/anthropic"
	"github.com/toolloop/toolloop/loop"
)

// denseAPI is a fake Anthropic Messages API whose tokenizer is twice as
// dense as the loop's estimate (a token every 2 bytes, as for text full
// of numbers and identifiers): it enforces the window with the real
// "prompt is too long" body, and answers count_tokens with the real
// count, or with countStatus and its error body when that is set.
type denseAPI struct {
	window, lastTurn int
	countStatus      int

	mu        sync.Mutex
	turns     int
	refused   int
	counts    int
	maxTokens int
}

func newDenseAPI(t *testing.T, window, lastTurn, countStatus int) (*denseAPI, llm.Model) {
	t.Helper()
	a := &denseAPI{window: window, lastTurn: lastTurn, countStatus: countStatus}
	hs := httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(hs.Close)
	client := sdk.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(hs.URL),
		option.WithAPIKey("test"), option.WithMaxRetries(0))
	return a, anthropic.New(client, &anthropic.Options{Model: "claude-sonnet-4-6"})
}

func (a *denseAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	tokens := len(body) / 2
	a.mu.Lock()
	defer a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/v1/messages/count_tokens" {
		a.counts++
		if a.countStatus != 0 {
			w.WriteHeader(a.countStatus)
			fmt.Fprint(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CSHoVb2Jq9Kx4eRm8TzWc"}`)
			return
		}
		fmt.Fprintf(w, `{"input_tokens":%d}`, tokens)
		return
	}
	if tokens > a.window {
		a.refused++
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: %d tokens > %d maximum"},"request_id":"req_011"}`, tokens, a.window)
		return
	}
	a.maxTokens = max(a.maxTokens, tokens)
	turn := a.turns
	a.turns++
	content, stop := fmt.Sprintf(`[{"type":"tool_use","id":"toolu_%03d","name":"fetch_page","input":{"page":%d}}]`, turn, turn), "tool_use"
	if turn >= a.lastTurn {
		content, stop = `[{"type":"text","text":"I have read every page."}]`, "end_turn"
	}
	fmt.Fprintf(w, `{"id":"msg_%03d","type":"message","role":"assistant","model":"claude-sonnet-4-6","content":%s,`+
		`"stop_reason":%q,"stop_sequence":null,"usage":{"input_tokens":%d,"output_tokens":30}}`, turn, content, stop, tokens)
}

// A run whose estimate is half the provider's count: on the estimate
// alone a request goes out past the window and is refused (the run
// clears and asks again); with counting, the requests near the window
// are counted first, cleared before they are sent, and none is refused.
// Far from the window no request is counted.
func TestCountTokensKeepsRequestsInsideTheWindow(t *testing.T) {
	const window, turns = 40_000, 40
	run := func(t *testing.T, count bool, countStatus int) (*denseAPI, *loop.Result) {
		api, m := newDenseAPI(t, window, turns, countStatus)
		cfg := longRunConfig(t, m, turns, &loop.ContextPolicy{Window: window, Margin: 1000, KeepToolResults: 1, CountTokens: count})
		cfg.Tools = pageTools(t, 4000)
		res, err := loop.Run(context.Background(), cfg, []llm.Message{llm.UserMessage("Read every page.")})
		if err != nil {
			t.Fatalf("run: %v (%d refused, %d counts)", err, api.refused, api.counts)
		}
		if err := llm.CheckHistory(res.Messages); err != nil {
			t.Fatalf("history: %v", err)
		}
		if got := loop.Replay(res.Events).History(); !sameHistory(got, res.Messages) {
			t.Fatal("the replayed history differs from the run's")
		}
		return api, res
	}
	t.Run("estimate", func(t *testing.T) {
		api, _ := run(t, false, 0)
		if api.refused == 0 || api.counts != 0 {
			t.Fatalf("%d refused, %d counts; want a refusal and no count (the estimate is half the count)", api.refused, api.counts)
		}
		t.Logf("on the estimate alone: %d requests refused, largest sent %d tokens", api.refused, api.maxTokens)
	})
	t.Run("counted", func(t *testing.T) {
		api, res := run(t, true, 0)
		counted := 0
		for _, ev := range res.Events {
			if ev.Kind == loop.TokensCounted {
				if ev.Count.Tokens == 0 || ev.Count.Error != "" {
					t.Errorf("tokens_counted %+v; want a count", ev.Count)
				}
				counted++
			}
		}
		if api.refused != 0 || api.maxTokens > window || counted != api.counts || counted == 0 || counted >= turns {
			t.Fatalf("%d refused, largest %d tokens, %d counts (%d in the log) over %d turns; want none refused, none past %d, some turns counted and not all",
				api.refused, api.maxTokens, api.counts, counted, turns, window)
		}
		t.Logf("%d of %d turns counted, largest request %d tokens", counted, turns+1, api.maxTokens)
	})
	t.Run("count fails", func(t *testing.T) {
		api, res := run(t, true, 529)
		failed := 0
		for _, ev := range res.Events {
			if ev.Kind == loop.TokensCounted {
				if ev.Count.Tokens != 0 || !strings.Contains(ev.Count.Error, "Overloaded") {
					t.Errorf("tokens_counted %+v; want the provider's failure", ev.Count)
				}
				failed++
			}
		}
		if failed == 0 || res.Status != loop.FinalAnswer {
			t.Fatalf("%d failed counts, status %s; want failures recorded and the run ending on the estimate", failed, res.Status)
		}
		t.Logf("%d counts failed, %d requests refused, the run went on", failed, api.refused)
	})
}

// A model that cannot count is asked once; the run goes on on its
// estimate and does not ask again.
func TestCountTokensUnsupported(t *testing.T) {
	const window, turns = 20_000, 30
	_, m := newDenseAPI(t, window, turns, 0)
	plain := llm.ModelFunc(m.Generate)
	cfg := longRunConfig(t, plain, turns, &loop.ContextPolicy{Window: window, CountTokens: true})
	res, err := loop.Run(context.Background(), cfg, []llm.Message{llm.UserMessage("Read every page.")})
	if err != nil {
		t.Fatal(err)
	}
	var counts []*loop.TokenCount
	for _, ev := range res.Events {
		if ev.Kind == loop.TokensCounted {
			counts = append(counts, ev.Count)
		}
	}
	if len(counts) != 1 || !counts[0].Unsupported {
		b, _ := json.Marshal(counts)
		t.Fatalf("tokens_counted events %s; want one, unsupported", b)
	}
}

// A count that fails because the server has no count endpoint (an
// OpenAI-compatible server without responses/input_tokens) marks the
// model as one not to ask again; a count that may succeed later does
// not.
func TestCountEventUnsupported(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&llm.Error{Kind: llm.KindNotFound, StatusCode: http.StatusNotFound, Err: errors.New("404 page not found")}, true},
		{&llm.Error{Kind: llm.KindBadRequest, StatusCode: http.StatusMethodNotAllowed, Err: errors.New("method not allowed")}, true},
		{fmt.Errorf("proxy: %w", errors.ErrUnsupported), true},
		{&llm.Error{Kind: llm.KindRateLimited, StatusCode: http.StatusTooManyRequests, Retryable: true, Err: errors.New("rate limited")}, false},
		{&llm.Error{Kind: llm.KindUnavailable, StatusCode: 529, Retryable: true, Err: errors.New("overloaded")}, false},
	} {
		ev := loop.CountEvent(0, c.err)
		if ev.Kind != loop.TokensCounted || ev.Count.Unsupported != c.want || ev.Count.Tokens != 0 || !strings.Contains(ev.Count.Error, c.err.Error()) {
			t.Errorf("CountEvent(%v) = %+v; want unsupported %v and the error", c.err, ev.Count, c.want)
		}
	}
}
