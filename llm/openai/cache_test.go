package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/openai"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

// oddArguments are a call's arguments as a model might write them: keys out
// of order, extra spaces. Sent back re-encoded (sorted, compacted) they
// would change the prefix of every later request.
const oddArguments = `{"z": %d,  "a": [2, 1]}`

// cachingServer is an OpenAI server (Chat Completions or Responses) for a
// run of turns: it calls lookup until the request holds lastTurn-1 calls,
// then answers. It caches as OpenAI does in outline: a request whose
// prompt_cache_key matches an earlier one and whose input begins with that
// request's input byte for byte reports the earlier prompt as
// cached_tokens. Tokens are a quarter of the input's bytes.
type cachingServer struct {
	*httptest.Server
	api      string // "chat" or "responses"
	lastTurn int

	mu       sync.Mutex
	requests [][]byte
	// seen is, by prompt_cache_key, the last input sent with it.
	seen  map[string][]byte
	usage llm.Usage
}

func newCachingServer(t *testing.T, api string, lastTurn int) *cachingServer {
	s := &cachingServer{api: api, lastTurn: lastTurn, seen: map[string][]byte{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *cachingServer) client() sdk.Client {
	return sdk.NewClient(option.WithBaseURL(s.URL), option.WithHTTPClient(s.Client()),
		option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
}

func (s *cachingServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Key      string            `json:"prompt_cache_key"`
		Messages []json.RawMessage `json:"messages"`
		Input    []json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	items, calls := req.Messages, 0
	if s.api == "responses" {
		items = req.Input
	}
	for _, it := range items {
		if bytes.Contains(it, []byte(`"tool_calls"`)) || bytes.Contains(it, []byte(`"type":"function_call"`)) {
			calls++
		}
	}
	var input []byte
	for _, it := range items {
		input = append(append(input, it...), ',')
	}
	s.mu.Lock()
	s.requests = append(s.requests, body)
	prompt := int64(len(body) / 4)
	var cached int64
	if prev, ok := s.seen[req.Key]; ok && req.Key != "" && bytes.HasPrefix(input, prev) {
		cached = int64(len(prev) / 4)
	}
	s.seen[req.Key] = input
	s.usage = s.usage.Add(llm.Usage{InputTokens: prompt, CachedInputTokens: cached, OutputTokens: 20})
	s.mu.Unlock()

	turn := calls + 1
	args, _ := json.Marshal(fmt.Sprintf(oddArguments, turn))
	w.Header().Set("Content-Type", "application/json")
	switch {
	case s.api == "chat" && turn < s.lastTurn:
		fmt.Fprintf(w, `{"id":"chatcmpl-%d","object":"chat.completion","created":1,"model":"gpt-4.1","choices":[{"index":0,`+
			`"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_%d","type":"function","function":{"name":"lookup","arguments":%s}}]},`+
			`"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":%d,"completion_tokens":20,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}`,
			turn, turn, args, prompt, prompt+20, cached)
	case s.api == "chat":
		fmt.Fprintf(w, `{"id":"chatcmpl-%d","object":"chat.completion","created":1,"model":"gpt-4.1","choices":[{"index":0,`+
			`"message":{"role":"assistant","content":"Done."},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":%d,"completion_tokens":20,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}`,
			turn, prompt, prompt+20, cached)
	case turn < s.lastTurn:
		fmt.Fprintf(w, `{"id":"resp_%d","object":"response","created_at":1,"status":"completed","model":"gpt-4.1","output":[`+
			`{"type":"function_call","id":"fc_%d","call_id":"call_%d","name":"lookup","arguments":%s,"status":"completed"}],`+
			`"usage":{"input_tokens":%d,"input_tokens_details":{"cached_tokens":%d},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}}`,
			turn, turn, turn, args, prompt, cached, prompt+20)
	default:
		fmt.Fprintf(w, `{"id":"resp_%d","object":"response","created_at":1,"status":"completed","model":"gpt-4.1","output":[`+
			`{"type":"message","id":"msg_%d","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Done.","annotations":[]}]}],`+
			`"usage":{"input_tokens":%d,"input_tokens_details":{"cached_tokens":%d},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}}`,
			turn, turn, prompt, cached, prompt+20)
	}
}

// lookupTools is one tool, lookup, whose result is a few hundred bytes.
func lookupTools(t *testing.T) *tool.Registry {
	type in struct {
		Z int   `json:"z"`
		A []int `json:"a"`
	}
	type out struct {
		Rows []string `json:"rows"`
	}
	lookup := tool.MustNew(tool.Spec[in]{Name: "lookup", Description: "looks rows up"},
		func(ctx context.Context, in in) (out, error) {
			return out{Rows: []string{strings.Repeat("row ", 50), strings.Repeat("col ", 50)}}, nil
		})
	reg, err := tool.NewRegistry(lookup)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// The price the runs below are charged: cached input at a tenth.
var gptPrice = loop.Price{InputPerMTok: 2, CachedInputPerMTok: 0.2, OutputPerMTok: 8}

// Consecutive requests of a run share their prefix byte for byte: each
// request's messages (Chat) or input items (Responses) begin with the
// previous request's, the call's arguments go back as the model wrote
// them, and every field after them is the same. All of a run's turns carry
// one prompt_cache_key, another run's another; the cached tokens the
// server reports are the run's CachedInputTokens and are priced at the
// cached rate.
func TestRequestsShareTheirPrefix(t *testing.T) {
	const turns = 4
	for _, api := range []string{"chat", "responses"} {
		t.Run(api, func(t *testing.T) {
			run := func(prompt string) (*loop.Result, *cachingServer) {
				s := newCachingServer(t, api, turns)
				var model llm.Model = openai.NewChat(s.client(), &openai.ChatOptions{CacheKeyPerRun: true})
				if api == "responses" {
					model = openai.NewResponses(s.client(), &openai.ResponsesOptions{CacheKeyPerRun: true})
				}
				res, err := loop.Run(context.Background(), loop.Config{
					Model: model, ModelName: "gpt-4.1", Tools: lookupTools(t),
					Budgets: loop.Budgets{MaxSteps: turns + 1, Prices: loop.Prices{"gpt-4.1": gptPrice}},
				}, []llm.Message{llm.SystemMessage("Look things up."), llm.UserMessage(prompt)})
				if err != nil {
					t.Fatal(err)
				}
				if res.Status != loop.FinalAnswer || res.Steps != turns {
					t.Fatalf("run: %s after %d steps (%s); want final_answer after %d", res.Status, res.Steps, res.Detail, turns)
				}
				return res, s
			}
			res, s := run("Find the rows.")
			key := ""
			for i, body := range s.requests {
				var f struct {
					Key string `json:"prompt_cache_key"`
				}
				json.Unmarshal(body, &f)
				if !strings.HasPrefix(f.Key, openai.CacheKeyPrefix) || (key != "" && f.Key != key) {
					t.Fatalf("request %d has prompt_cache_key %q; want one key %s... for the whole run (first %q)", i+1, f.Key, openai.CacheKeyPrefix, key)
				}
				key = f.Key
				if i > 0 && !bytes.Contains(body, []byte(`"arguments":`+mustJSON(fmt.Sprintf(oddArguments, 1)))) {
					t.Fatalf("request %d does not send the call's arguments as the model wrote them:\n%s", i+1, body)
				}
			}
			listField := `"messages":`
			if api == "responses" {
				listField = `"input":`
			}
			for i := 1; i < len(s.requests); i++ {
				pm, pr := splitList(t, s.requests[i-1], listField)
				nm, nr := splitList(t, s.requests[i], listField)
				if !bytes.HasPrefix(nm, pm) || nm[len(pm)] != ',' {
					t.Fatalf("request %d's %s do not begin with request %d's:\n%s\n---\n%s", i+1, listField, i, pm, nm)
				}
				if !bytes.Equal(pr, nr) {
					t.Fatalf("request %d's other fields differ from request %d's:\n%s\n---\n%s", i+1, i, pr, nr)
				}
			}
			if res.Usage != s.usage || res.Usage.CachedInputTokens == 0 {
				t.Fatalf("the run reports %+v; the server counted %+v (want cache reads)", res.Usage, s.usage)
			}
			u := s.usage
			want := (float64(u.InputTokens-u.CachedInputTokens)*2 + float64(u.CachedInputTokens)*0.2 + float64(u.OutputTokens)*8) / 1e6
			if math.Abs(res.Cost-want) > 1e-12 {
				t.Fatalf("cost %v, want %v: cached tokens at the cached rate", res.Cost, want)
			}

			_, other := run("Find the columns.")
			var f struct {
				Key string `json:"prompt_cache_key"`
			}
			json.Unmarshal(other.requests[0], &f)
			if f.Key == key {
				t.Fatalf("two runs with other prompts share the prompt_cache_key %q", key)
			}
		})
	}
}

// llm.Request.CacheKey, when set, is the prompt_cache_key; without
// CacheKeyPerRun no key is sent, and PromptCacheKey wins over both.
func TestPromptCacheKeyChoice(t *testing.T) {
	for _, tc := range []struct {
		name     string
		perRun   bool
		fixed    string
		reqKey   string
		want     string
		wantNone bool
	}{
		{name: "off", wantNone: true},
		{name: "request key", perRun: true, reqKey: "run-0042", want: "run-0042"},
		{name: "fixed key wins", perRun: true, fixed: "tenant-7", reqKey: "run-0042", want: "tenant-7"},
	} {
		for _, api := range []string{"chat", "responses"} {
			t.Run(tc.name+"/"+api, func(t *testing.T) {
				s := newCachingServer(t, api, 1)
				var model llm.Model = openai.NewChat(s.client(), &openai.ChatOptions{CacheKeyPerRun: tc.perRun, PromptCacheKey: tc.fixed})
				if api == "responses" {
					model = openai.NewResponses(s.client(), &openai.ResponsesOptions{CacheKeyPerRun: tc.perRun, PromptCacheKey: tc.fixed})
				}
				if _, err := model.Generate(context.Background(), &llm.Request{Model: "gpt-4.1", CacheKey: tc.reqKey,
					Messages: []llm.Message{llm.UserMessage("Hi.")}}); err != nil {
					t.Fatal(err)
				}
				var f map[string]json.RawMessage
				json.Unmarshal(s.requests[0], &f)
				got, sent := f["prompt_cache_key"]
				if tc.wantNone {
					if sent {
						t.Fatalf("prompt_cache_key %s sent without CacheKeyPerRun", got)
					}
					return
				}
				if string(got) != mustJSON(tc.want) {
					t.Fatalf("prompt_cache_key = %s, want %q", got, tc.want)
				}
			})
		}
	}
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// splitList splits a request body at the end of the list field (the
// messages or the input items): the body up to the list's last element,
// and what follows the list.
func splitList(t *testing.T, body []byte, field string) (list, rest []byte) {
	t.Helper()
	start := bytes.Index(body, []byte(field+"["))
	end := bytes.Index(body, []byte(`}],"model":`))
	if start < 0 || end < start {
		t.Fatalf("cannot find %s[...] followed by the model in:\n%s", field, body)
	}
	return body[:end+1], body[end+2:]
}
