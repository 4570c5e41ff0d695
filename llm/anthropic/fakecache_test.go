package anthropic

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// cacheAPI is a fake Messages API that bills prompt caching the way the
// real one does, for tests that measure what a run costs:
//
//   - a prompt is a sequence of blocks, in the API's order: tools, system,
//     then each message's content blocks (the first block of a message
//     carries its role);
//   - a prefix is identified by the bytes of its blocks with their
//     cache_control markers taken out, so a marker that moves does not
//     change the key;
//   - the API looks for a cached prefix at each breakpoint and at most
//     cacheLookback blocks before it, reads the longest one it finds
//     (refreshing its lifetime), and writes an entry at each later
//     breakpoint whose prefix has at least cacheMinTokens tokens;
//   - entries live their TTL (five minutes, or an hour for "ttl":"1h")
//     from their last use, on a clock the test advances;
//   - usage is reported as the API reports it: input_tokens counts only
//     what was neither read nor written, cache_read_input_tokens and
//     cache_creation_input_tokens the rest;
//   - more than four breakpoints is the API's 400;
//   - with thinking, preserved thinking's prefix check: each thinking block
//     sent back must come after the very blocks (cache_control aside) of
//     the request that produced it, or it is bound to a different
//     conversation: a 400 naming it, or with the beta
//     thinking-binding-controls-2026-08-01 and
//     thinking.block_binding.prefix_mismatch_behavior "drop_block" the
//     block and every later thinking block are dropped (not billed) and
//     listed in the reply's input_transformations.
//
// Tokens are counted as one per four bytes of a block's JSON, rounded up:
// not the real tokenizer, but the same count for the same bytes, which is
// all billing needs. The reply to each request is a call of fetch_page
// (or of tools[(turn-1) % len(tools)]) until the lastTurn-th model turn,
// which answers; a compaction's summary request is answered with a summary.
type cacheAPI struct {
	t        *testing.T
	URL      string
	lastTurn int
	// step is how far the clock moves at each request.
	step time.Duration
	// calls is how many fetch_page calls each reply makes (0 means 1).
	calls int
	// thinking makes each reply begin with a signed thinking block, which
	// the next request must send back unchanged.
	thinking bool
	// tools, when set, are the tools the turns call in rotation.
	tools []string

	mu      sync.Mutex
	turn    int // model turns answered, summaries aside
	minted  map[string][32]byte
	dropped int // thinking blocks dropped by drop_block
	now     time.Time
	entries map[[32]byte]cacheEntry
	bodies  [][]byte
	bill    cacheBill
}

// cacheEntry is one cached prefix.
type cacheEntry struct {
	expires time.Time
	ttl     time.Duration
}

// cacheBill is what the fake has charged, in tokens and dollars.
type cacheBill struct {
	Requests                          int
	Input, CacheRead, CacheWrite, Out int64
	Dollars                           float64
	// Uncached is what the same requests would cost with no cache.
	Uncached float64
}

// Rates of the fake, US dollars per million tokens (Claude Sonnet's).
const (
	rateInput     = 3.00
	rateCacheRead = 0.30 // 0.1x
	rateWrite5m   = 3.75 // 1.25x
	rateWrite1h   = 6.00 // 2x
	rateOutput    = 15.00
)

const (
	cacheLookback  = 20
	cacheMinTokens = 1024
)

func newCacheAPI(t *testing.T, lastTurn int) *cacheAPI {
	t.Helper()
	a := &cacheAPI{t: t, lastTurn: lastTurn, step: 20 * time.Second,
		now: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC), entries: map[[32]byte]cacheEntry{}, minted: map[string][32]byte{}}
	hs := httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(hs.Close)
	a.URL = hs.URL
	return a
}

func (a *cacheAPI) client() anthropic.Client {
	return anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(a.URL),
		option.WithAPIKey("test"), option.WithMaxRetries(0))
}

func (a *cacheAPI) totals() cacheBill {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bill
}

func (a *cacheAPI) requests() [][]byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([][]byte(nil), a.bodies...)
}

// promptBlock is one block of a prompt as the cache sees it.
type promptBlock struct {
	key    []byte        // its bytes without cache_control
	tokens int64         // its token count
	ttl    time.Duration // its breakpoint's lifetime; 0 for no breakpoint
	// signature is a thinking block's signature (a redacted_thinking
	// block's data); path is where the block is, as the API names it.
	signature, path string
}

func (a *cacheAPI) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Tools    []json.RawMessage `json:"tools"`
		System   []json.RawMessage `json:"system"`
		Messages []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
		CacheControl json.RawMessage `json:"cache_control"`
		Thinking     struct {
			BlockBinding struct {
				PrefixMismatchBehavior string `json:"prefix_mismatch_behavior"`
			} `json:"block_binding"`
		} `json:"thinking"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		apiErrorReply(w, "invalid_request_error", "the body is not JSON: "+err.Error())
		return
	}
	var blocks []promptBlock
	add := func(prefix string, raw json.RawMessage) error {
		b, err := cacheBlock(prefix, raw)
		if err != nil {
			return err
		}
		blocks = append(blocks, b)
		return nil
	}
	var err error
	for _, t := range req.Tools {
		err = errorsJoin(err, add("tool:", t))
	}
	for _, s := range req.System {
		err = errorsJoin(err, add("system:", s))
	}
	for k, m := range req.Messages {
		for i, c := range m.Content {
			prefix := ""
			if i == 0 {
				prefix = m.Role + ":"
			}
			err = errorsJoin(err, add(prefix, c))
			if err == nil {
				blocks[len(blocks)-1].path = fmt.Sprintf("messages.%d.content.%d", k, i)
			}
		}
	}
	if err != nil {
		apiErrorReply(w, "invalid_request_error", err.Error())
		return
	}
	if len(req.CacheControl) > 0 && len(blocks) > 0 && blocks[len(blocks)-1].ttl == 0 {
		// Automatic caching: a breakpoint on the last block.
		blocks[len(blocks)-1].ttl = 5 * time.Minute
	}

	a.mu.Lock()
	defer a.mu.Unlock()
	a.bodies = append(a.bodies, body)
	a.now = a.now.Add(a.step)
	binding := strings.Contains(r.Header.Get("anthropic-beta"), "thinking-binding-controls-2026-08-01")
	drop := req.Thinking.BlockBinding.PrefixMismatchBehavior
	if drop != "" && !binding {
		apiErrorReply(w, "invalid_request_error", "thinking.block_binding: This setting requires the `thinking-binding-controls-2026-08-01` value in the `anthropic-beta` header.")
		return
	}
	blocks, transformations, err := a.prefixCheck(blocks, drop == "drop_block")
	if err != nil {
		apiErrorReply(w, "invalid_request_error", err.Error())
		return
	}
	prefix := blockPrefix(blocks)
	read, write, input, err := a.cache(blocks)
	if err != nil {
		apiErrorReply(w, "invalid_request_error", err.Error())
		return
	}

	a.turn++
	turn := a.turn
	summary := strings.Contains(string(body), "is being compacted to fit the model's context window")
	if summary {
		a.turn-- // not a turn of the run
	}
	tool := "fetch_page"
	if len(a.tools) > 0 {
		tool = a.tools[(turn-1)%len(a.tools)]
	}
	var content string
	var out int64
	stop := "tool_use"
	switch {
	case summary:
		content = `{"type":"text","text":"Pages 1 to 3 were read; the figures went up."}`
		out, stop = 14, "end_turn"
	case turn < a.lastTurn:
		var uses []string
		for i := range max(a.calls, 1) {
			page := turn
			if a.calls > 1 {
				page = turn*100 + i
			}
			uses = append(uses, fmt.Sprintf(`{"type":"tool_use","id":"toolu_%03d_%02d","name":%q,"input":{"page":%d}}`, turn, i, tool, page))
			out += 40
		}
		content = strings.Join(uses, ",")
	default:
		content = `{"type":"text","text":"I have read every page."}`
		out, stop = 12, "end_turn"
	}
	if a.thinking {
		// The signature is bound to the request's blocks.
		sig := fmt.Sprintf("sig-%03d", a.bill.Requests+1)
		a.minted[sig] = prefix
		content = fmt.Sprintf(`{"type":"thinking","thinking":"Page %d comes next.","signature":%q},`, turn, sig) + content
		out += 30
	}
	content = "[" + content + "]"
	a.bill.Requests++
	a.bill.Input += input
	a.bill.CacheRead += read.tokens
	a.bill.CacheWrite += write.tokens
	a.bill.Out += out
	a.bill.Dollars += (float64(input)*rateInput + float64(read.tokens)*rateCacheRead +
		float64(write.tokens5m)*rateWrite5m + float64(write.tokens1h)*rateWrite1h + float64(out)*rateOutput) / 1e6
	a.bill.Uncached += (float64(input+read.tokens+write.tokens)*rateInput + float64(out)*rateOutput) / 1e6

	extra := ""
	if binding {
		// With the beta, every reply lists what was done to its input.
		t, _ := json.Marshal(transformations)
		extra = `"input_transformations":` + string(t) + ","
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"msg_%03d","type":"message","role":"assistant","model":"claude-sonnet-4-6",%s"content":%s,`+
		`"stop_reason":%q,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":%d,`+
		`"cache_read_input_tokens":%d,"cache_creation":{"ephemeral_5m_input_tokens":%d,"ephemeral_1h_input_tokens":%d},"output_tokens":%d}}`,
		turn, extra, content, stop, input, write.tokens, read.tokens, write.tokens5m, write.tokens1h, out)
}

// inputTransformation is one entry of a reply's input_transformations.
type inputTransformation struct {
	Type   string `json:"type"`
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// blockPrefix is the digest of blocks as the prefix check compares them:
// their bytes without cache_control, in order.
func blockPrefix(blocks []promptBlock) [32]byte {
	h := sha256.New()
	for _, b := range blocks {
		h.Write(b.key)
		h.Write([]byte{0})
	}
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return d
}

// prefixCheck runs preserved thinking's prefix check on a request's
// blocks: each thinking block this fake signed must follow the blocks of
// the request that produced it. The first that does not, and every
// thinking block after it, fail: with drop they leave the prompt and are
// listed, else the request is refused with the API's message.
func (a *cacheAPI) prefixCheck(blocks []promptBlock, drop bool) ([]promptBlock, []inputTransformation, error) {
	out := blocks[:0:0]
	transformations := []inputTransformation{}
	failed := false
	for i, b := range blocks {
		if b.signature == "" {
			out = append(out, b)
			continue
		}
		if want, ok := a.minted[b.signature]; ok && !failed && want != blockPrefix(blocks[:i]) {
			failed = true
		}
		if !failed {
			out = append(out, b)
			continue
		}
		if !drop {
			return nil, nil, fmt.Errorf("%s: Invalid `signature` in `thinking` block. The block is bound to a different conversation. "+
				"Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to \"drop_block\".", b.path)
		}
		a.dropped++
		transformations = append(transformations, inputTransformation{Type: "thinking_dropped", Path: b.path, Reason: "prefix_binding_mismatch"})
	}
	return out, transformations, nil
}

// cacheRead and cacheWrite are what one request read and wrote.
type cacheRead struct{ tokens int64 }
type cacheWrite struct{ tokens, tokens5m, tokens1h int64 }

// cache looks blocks up in the cache and writes their new entries, as the
// API does (see cacheAPI); it returns the tokens read, written and left.
func (a *cacheAPI) cache(blocks []promptBlock) (cacheRead, cacheWrite, int64, error) {
	var bps []int
	keys := make([][32]byte, len(blocks))
	cum := make([]int64, len(blocks)) // tokens up to and including block i
	h := sha256.New()
	var total int64
	for i, b := range blocks {
		h.Write(b.key)
		h.Write([]byte{0})
		copy(keys[i][:], h.Sum(nil))
		total += b.tokens
		cum[i] = total
		if b.ttl > 0 {
			bps = append(bps, i)
		}
	}
	if len(bps) > maxBreakpoints {
		return cacheRead{}, cacheWrite{}, 0, fmt.Errorf("A maximum of %d blocks with cache_control may be provided. Found %d.", maxBreakpoints, len(bps))
	}
	hit := -1
	for _, bp := range bps {
		for j := bp; j >= 0 && j > bp-cacheLookback; j-- {
			if e, ok := a.entries[keys[j]]; ok && a.now.Before(e.expires) {
				hit = max(hit, j)
				break
			}
		}
	}
	var read cacheRead
	if hit >= 0 {
		e := a.entries[keys[hit]]
		e.expires = a.now.Add(e.ttl) // a read refreshes the entry
		a.entries[keys[hit]] = e
		read.tokens = cum[hit]
	}
	var write cacheWrite
	prev := read.tokens // the end of what the cache holds for this prompt
	for _, bp := range bps {
		if bp <= hit || cum[bp] < cacheMinTokens {
			continue
		}
		ttl := blocks[bp].ttl
		a.entries[keys[bp]] = cacheEntry{expires: a.now.Add(ttl), ttl: ttl}
		n := cum[bp] - prev
		prev = cum[bp]
		if ttl == time.Hour {
			write.tokens1h += n
		} else {
			write.tokens5m += n
		}
		write.tokens += n
	}
	return read, write, total - read.tokens - write.tokens, nil
}

// cacheBlock reads one block: its bytes with cache_control taken out (the
// keys sorted, as encoding/json writes a map, so that only the content
// counts) and the lifetime its marker asks for.
func cacheBlock(prefix string, raw json.RawMessage) (promptBlock, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return promptBlock{}, fmt.Errorf("a block is not a JSON object: %s", raw)
	}
	var b promptBlock
	if cc, ok := fields["cache_control"]; ok {
		var m struct {
			Type string `json:"type"`
			TTL  string `json:"ttl"`
		}
		if err := json.Unmarshal(cc, &m); err != nil || m.Type != "ephemeral" {
			return b, fmt.Errorf("cache_control: want {\"type\":\"ephemeral\"}, got %s", cc)
		}
		switch m.TTL {
		case "", "5m":
			b.ttl = 5 * time.Minute
		case "1h":
			b.ttl = time.Hour
		default:
			return b, fmt.Errorf("cache_control.ttl: want 5m or 1h, got %q", m.TTL)
		}
		if t := string(fields["type"]); t == `"thinking"` || t == `"redacted_thinking"` {
			return b, fmt.Errorf("a %s block cannot carry cache_control", t)
		}
		delete(fields, "cache_control")
	}
	switch string(fields["type"]) {
	case `"thinking"`:
		json.Unmarshal(fields["signature"], &b.signature)
	case `"redacted_thinking"`:
		json.Unmarshal(fields["data"], &b.signature)
	}
	key, err := json.Marshal(fields)
	if err != nil {
		return b, err
	}
	b.key = append([]byte(prefix), key...)
	b.tokens = int64(len(b.key)+3) / 4
	return b, nil
}

// apiErrorReply answers with the API's 400 error body.
func apiErrorReply(w http.ResponseWriter, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
	w.Write(b)
}

// errorsJoin keeps the first error.
func errorsJoin(err, next error) error {
	if err != nil {
		return err
	}
	return next
}

// withoutCacheControl returns body with every cache_control field taken
// out, its other bytes as they were.
func withoutCacheControl(body []byte) []byte {
	for _, m := range [][]byte{
		[]byte(`,"cache_control":{"type":"ephemeral"}`),
		[]byte(`,"cache_control":{"ttl":"1h","type":"ephemeral"}`),
		[]byte(`"cache_control":{"type":"ephemeral"},`),
		[]byte(`"cache_control":{"ttl":"1h","type":"ephemeral"},`),
	} {
		body = bytes.ReplaceAll(body, m, nil)
	}
	return body
}
