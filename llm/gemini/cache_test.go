package gemini_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/gemini"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

// implicitCache is a Gemini API server for a run of turns: it calls lookup
// until the request holds lastTurn-1 calls, then answers. It caches as
// Gemini's implicit caching does in outline: a request whose system
// instruction and tools are the last request's, and whose contents begin
// with the last request's contents byte for byte, reports that earlier
// prompt as cachedContentTokenCount. Tokens are a quarter of the bytes.
type implicitCache struct {
	srv      *httptest.Server
	lastTurn int

	mu       sync.Mutex
	requests [][]byte
	last     struct{ contents, rest []byte }
	usage    llm.Usage
}

func newImplicitCache(t *testing.T, lastTurn int) *implicitCache {
	s := &implicitCache{lastTurn: lastTurn}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *implicitCache) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	contents, rest, ok := splitContents(body)
	if !ok {
		http.Error(w, "no contents", http.StatusBadRequest)
		return
	}
	turn := bytes.Count(contents, []byte(`"functionCall":`)) + 1
	s.mu.Lock()
	s.requests = append(s.requests, body)
	prompt := int64(len(body) / 4)
	var cached int64
	if s.last.contents != nil && bytes.Equal(rest, s.last.rest) && bytes.HasPrefix(contents, s.last.contents) {
		cached = int64((len(s.last.contents) + len(rest)) / 4)
	}
	s.last.contents, s.last.rest = contents, rest
	s.usage = s.usage.Add(llm.Usage{InputTokens: prompt, CachedInputTokens: cached, OutputTokens: 10})
	s.mu.Unlock()

	part := `{"text":"Done."}`
	if turn < s.lastTurn {
		// Keys out of the order the SDK writes them, as a model may.
		part = fmt.Sprintf(`{"functionCall":{"id":"call_%d","name":"lookup","args":{"z":%d,"a":[2,1],"b":{"y":1,"x":2}}}}`, turn, turn)
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"candidates":[{"content":{"parts":[%s],"role":"model"},"finishReason":"STOP","index":0}],`+
		`"usageMetadata":{"promptTokenCount":%d,"cachedContentTokenCount":%d,"candidatesTokenCount":10,"totalTokenCount":%d},`+
		`"modelVersion":"gemini-2.5-flash","responseId":"r%d"}`, part, prompt, cached, prompt+10, turn)
}

// splitContents splits a request body after its contents array's last
// element: the body up to there, and what follows the array.
func splitContents(body []byte) (contents, rest []byte, ok bool) {
	end := bytes.Index(body, []byte(`}],"generationConfig":`))
	if end < 0 || !bytes.HasPrefix(body, []byte(`{"contents":[`)) {
		return nil, nil, false
	}
	return body[:end+1], body[end+2:], true
}

// Consecutive requests of a run share their prefix byte for byte: each
// request's contents begin with the previous request's, every other field
// (system instruction, tools, configuration) is the same, and a call's
// arguments go back the same way each turn. The cached tokens Gemini
// reports are the run's CachedInputTokens, priced at the cached rate.
func TestRequestsShareTheirPrefix(t *testing.T) {
	const turns = 4
	s := newImplicitCache(t, turns)
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: "test", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: s.srv.URL}, HTTPClient: s.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	type in struct {
		Z int            `json:"z"`
		A []int          `json:"a"`
		B map[string]int `json:"b"`
	}
	type out struct {
		Rows []string `json:"rows"`
	}
	lookup := tool.MustNew(tool.Spec[in]{Name: "lookup", Description: "looks rows up"},
		func(ctx context.Context, in in) (out, error) {
			return out{Rows: []string{strings.Repeat("row ", 50)}}, nil
		})
	reg, err := tool.NewRegistry(lookup)
	if err != nil {
		t.Fatal(err)
	}
	price := loop.Price{InputPerMTok: 0.30, CachedInputPerMTok: 0.075, OutputPerMTok: 2.50}
	res, err := loop.Run(context.Background(), loop.Config{
		Model: gemini.New(client, nil), ModelName: "gemini-2.5-flash", Tools: reg,
		Budgets: loop.Budgets{MaxSteps: turns + 1, Prices: loop.Prices{"gemini-2.5-flash": price}},
	}, []llm.Message{llm.SystemMessage("Look things up."), llm.UserMessage("Find the rows.")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != loop.FinalAnswer || res.Steps != turns {
		t.Fatalf("run: %s after %d steps (%s); want final_answer after %d", res.Status, res.Steps, res.Detail, turns)
	}
	if len(s.requests) != turns {
		t.Fatalf("%d requests, want %d", len(s.requests), turns)
	}
	for i := 1; i < len(s.requests); i++ {
		pc, pr, _ := splitContents(s.requests[i-1])
		nc, nr, ok := splitContents(s.requests[i])
		if !ok || !bytes.HasPrefix(nc, pc) || nc[len(pc)] != ',' {
			t.Fatalf("request %d's contents do not begin with request %d's:\n%s\n---\n%s", i+1, i, pc, nc)
		}
		if !bytes.Equal(pr, nr) {
			t.Fatalf("request %d's other fields differ from request %d's:\n%s\n---\n%s", i+1, i, pr, nr)
		}
	}
	if res.Usage != s.usage || res.Usage.CachedInputTokens == 0 {
		t.Fatalf("the run reports %+v; the server counted %+v (want cache reads)", res.Usage, s.usage)
	}
	u := s.usage
	want := (float64(u.InputTokens-u.CachedInputTokens)*0.30 + float64(u.CachedInputTokens)*0.075 + float64(u.OutputTokens)*2.50) / 1e6
	if math.Abs(res.Cost-want) > 1e-12 {
		t.Fatalf("cost %v, want %v: cached tokens at the cached rate", res.Cost, want)
	}
}
