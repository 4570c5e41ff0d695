package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/toolloop/toolloop/loop"
)

// builtinPrices returns list prices of common models in US dollars per million
// tokens (standard tier, no batch discount), looked up on 2026-12-02. They
// price runs for the cost shown on the stop line and for --max-cost;
// --prices FILE overrides or adds to them. Prices change: check the
// providers' pages before relying on a budget.
//
// Where the loop's price model is coarser than a provider's, the table
// errs on the side a budget survives:
//   - Anthropic bills prompt-cache writes at 1.25x the input rate for its
//     5-minute cache (toolloop run's default) and 2x for the 1-hour cache;
//     the table has both, and Anthropic reports which writes went to which
//     cache, so a run is priced right wherever its TTL was chosen (a
//     Temporal worker's --cache-ttl, which the client does not know).
//     --cache-ttl 1h also prices every write at 2x (sourceFlags.cachePrice),
//     for a report that does not split them. Reads are 0.1x.
//     OpenAI and Gemini do not charge extra for writing their caches, so
//     their entries leave the cache-write rate at the input rate
//     (loop.Price's zero).
//   - Gemini 2.5 Pro bills prompts over 200K tokens at a higher rate; the
//     table has the rate for shorter prompts.
//   - Gemini's implicit cache: Google announced a 75% discount on cached
//     tokens for Gemini 2.5 (May 2025; govindhtech.com, "Implicit Caching
//     Is Now Supported In Gemini 2.5 Models"; jangwook.net lists $0.075
//     for 2.5 Flash in May 2026), while deploybase.ai's summary of the
//     pricing page says 90%. The table takes the smaller discount, 0.25x
//     the input rate, so a budget survives either.
func builtinPrices() loop.Prices {
	return loop.Prices{
		// OpenAI. Input and output: developers.openai.com/api/docs/pricing as
		// summarized by deploybase.ai, "OpenAI Pricing" (data from OpenAI's
		// pricing page, March 2026); gpt-5.4-mini from adk-model's OpenAI price
		// table (docs.rs, "Token pricing for OpenAI models (March 2026)").
		// Cached input: GitHub's Copilot price list (github/docs
		// data/tables/copilot/models-and-pricing.yml: GPT-4.1 $0.50, GPT-5 mini
		// $0.025) and the discount OpenAI gives each family (90% off for GPT-5,
		// 75% for GPT-4.1, 50% for GPT-4o), as adk-model's table lists them.
		"gpt-5.4":      {InputPerMTok: 2.50, CachedInputPerMTok: 0.25, OutputPerMTok: 15.00},
		"gpt-5.4-mini": {InputPerMTok: 0.75, CachedInputPerMTok: 0.075, OutputPerMTok: 4.50},
		"gpt-5":        {InputPerMTok: 1.25, CachedInputPerMTok: 0.125, OutputPerMTok: 10.00},
		"gpt-5-mini":   {InputPerMTok: 0.25, CachedInputPerMTok: 0.025, OutputPerMTok: 2.00},
		"gpt-5-nano":   {InputPerMTok: 0.05, CachedInputPerMTok: 0.005, OutputPerMTok: 0.40},
		"gpt-4.1":      {InputPerMTok: 2.00, CachedInputPerMTok: 0.50, OutputPerMTok: 8.00},
		"gpt-4.1-mini": {InputPerMTok: 0.40, CachedInputPerMTok: 0.10, OutputPerMTok: 1.60},
		"gpt-4.1-nano": {InputPerMTok: 0.10, CachedInputPerMTok: 0.025, OutputPerMTok: 0.40},
		"gpt-4o":       {InputPerMTok: 2.50, CachedInputPerMTok: 1.25, OutputPerMTok: 10.00},
		"gpt-4o-mini":  {InputPerMTok: 0.15, CachedInputPerMTok: 0.075, OutputPerMTok: 0.60},

		// Anthropic: platform.claude.com/docs/about-claude/pricing, "Model
		// pricing" (base input, 5-minute cache writes, cache hits and
		// refreshes, output), 2026; writes are 1.25x the base input rate
		// (as also listed by claudecodeguides.com, "Claude Prompt Caching
		// Pricing Guide", 2026).
		"claude-opus-4-6":   {InputPerMTok: 5.00, CachedInputPerMTok: 0.50, CacheWriteInputPerMTok: 6.25, CacheWrite1hInputPerMTok: 10.00, OutputPerMTok: 25.00},
		"claude-opus-4-5":   {InputPerMTok: 5.00, CachedInputPerMTok: 0.50, CacheWriteInputPerMTok: 6.25, CacheWrite1hInputPerMTok: 10.00, OutputPerMTok: 25.00},
		"claude-opus-4-1":   {InputPerMTok: 15.00, CachedInputPerMTok: 1.50, CacheWriteInputPerMTok: 18.75, CacheWrite1hInputPerMTok: 30.00, OutputPerMTok: 75.00},
		"claude-sonnet-4-6": {InputPerMTok: 3.00, CachedInputPerMTok: 0.30, CacheWriteInputPerMTok: 3.75, CacheWrite1hInputPerMTok: 6.00, OutputPerMTok: 15.00},
		"claude-sonnet-4-5": {InputPerMTok: 3.00, CachedInputPerMTok: 0.30, CacheWriteInputPerMTok: 3.75, CacheWrite1hInputPerMTok: 6.00, OutputPerMTok: 15.00},
		"claude-sonnet-4-0": {InputPerMTok: 3.00, CachedInputPerMTok: 0.30, CacheWriteInputPerMTok: 3.75, CacheWrite1hInputPerMTok: 6.00, OutputPerMTok: 15.00},
		"claude-haiku-4-5":  {InputPerMTok: 1.00, CachedInputPerMTok: 0.10, CacheWriteInputPerMTok: 1.25, CacheWrite1hInputPerMTok: 2.00, OutputPerMTok: 5.00},
		"claude-3-5-haiku":  {InputPerMTok: 0.80, CachedInputPerMTok: 0.08, CacheWriteInputPerMTok: 1.00, CacheWrite1hInputPerMTok: 1.60, OutputPerMTok: 4.00},

		// Google: ai.google.dev/gemini-api/docs/pricing (paid tier, text) as
		// summarized by deploybase.ai, "Gemini API Pricing" (data from Google's
		// pricing page, March 2026), and hivebook.wiki, "Gemini 2.5" (2026).
		"gemini-2.5-pro":        {InputPerMTok: 1.25, CachedInputPerMTok: 0.3125, OutputPerMTok: 10.00},
		"gemini-2.5-flash":      {InputPerMTok: 0.30, CachedInputPerMTok: 0.075, OutputPerMTok: 2.50},
		"gemini-2.5-flash-lite": {InputPerMTok: 0.10, CachedInputPerMTok: 0.025, OutputPerMTok: 0.40},
	}
}

// snapshotSuffix matches the date providers append to pinned model
// versions: gpt-4.1-2025-04-14, claude-sonnet-4-5-20250929.
var snapshotSuffix = regexp.MustCompile(`-(\d{4}-\d{2}-\d{2}|\d{8})$`)

// priceFor returns the price of model in prices: its own entry, else the
// entry of the model it is a dated snapshot of ("models/" prefixes, as
// Gemini names them, are ignored).
func priceFor(prices loop.Prices, model string) (loop.Price, bool) {
	name := strings.TrimPrefix(model, "models/")
	if p, ok := prices[name]; ok {
		return p, true
	}
	if base := snapshotSuffix.ReplaceAllString(name, ""); base != name {
		p, ok := prices[base]
		return p, ok
	}
	return loop.Price{}, false
}

// maxPricePerMTok is the highest price per million tokens --prices takes:
// far above any real model's, and low enough that a run's cost stays a
// finite number however many tokens it uses (a price of 1e308 made it +Inf).
const maxPricePerMTok = 1e6

// maxPricesFileBytes caps how much of a --prices file is read: a price
// table is a few kilobytes.
const maxPricesFileBytes = 1 << 20

// readPricesFile reads the --prices file at path: a regular file of at
// most maxPricesFileBytes. Anything else (a device such as /dev/zero that
// never ends, a FIFO whose open would wait for a writer) is refused before
// it is opened for reading.
func readPricesFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--prices: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("--prices %s: not a regular file (%s); want a JSON file", path, fileKind(st.Mode()))
	}
	if st.Size() > maxPricesFileBytes {
		return nil, fmt.Errorf("--prices %s: %d bytes, more than the %d bytes a prices file may have", path, st.Size(), maxPricesFileBytes)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--prices: %w", err)
	}
	defer f.Close()
	// The file may have changed since Stat: check what was opened, and
	// read no more than the cap whatever it is.
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("--prices %s: not a regular file; want a JSON file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxPricesFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--prices: %w", err)
	}
	if len(data) > maxPricesFileBytes {
		return nil, fmt.Errorf("--prices %s: more than the %d bytes a prices file may have", path, maxPricesFileBytes)
	}
	return data, nil
}

// fileKind names the kind of file mode m describes, for messages.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "not a plain file"
}

// loadPrices returns the built-in table with the entries of the JSON file
// at path (if any) added or replacing theirs. The file maps model names to
// prices: {"my-model": {"input_per_mtok": 1, "cached_input_per_mtok": 0.1,
// "cache_write_input_per_mtok": 1.25, "output_per_mtok": 4}}. A missing
// cached rate is the input rate (no discount assumed); a missing or zero
// cache-write rate is the input rate too; a missing or zero
// "cache_write_1h_input_per_mtok" (the hour-long cache's writes) is the
// cache-write rate.
func loadPrices(path string) (loop.Prices, error) {
	out := builtinPrices()
	if path == "" {
		return out, nil
	}
	data, err := readPricesFile(path)
	if err != nil {
		return nil, err
	}
	var file map[string]*struct {
		Input        *float64 `json:"input_per_mtok"`
		CachedInput  *float64 `json:"cached_input_per_mtok"`
		CacheWrite   *float64 `json:"cache_write_input_per_mtok"`
		CacheWrite1h *float64 `json:"cache_write_1h_input_per_mtok"`
		Output       *float64 `json:"output_per_mtok"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf(`--prices %s: %v; want {"MODEL": {"input_per_mtok": N, "cached_input_per_mtok": N, "cache_write_input_per_mtok": N, "output_per_mtok": N}}`, path, err)
	}
	models := make([]string, 0, len(file))
	for m := range file {
		models = append(models, m)
	}
	sort.Strings(models)
	for _, m := range models {
		e := file[m]
		switch {
		case e == nil || e.Input == nil || e.Output == nil:
			return nil, fmt.Errorf("--prices %s: model %q needs input_per_mtok and output_per_mtok", path, m)
		}
		for _, r := range []struct {
			name string
			v    *float64
		}{{"input_per_mtok", e.Input}, {"cached_input_per_mtok", e.CachedInput}, {"cache_write_input_per_mtok", e.CacheWrite}, {"cache_write_1h_input_per_mtok", e.CacheWrite1h}, {"output_per_mtok", e.Output}} {
			if r.v != nil && !(*r.v >= 0 && *r.v <= maxPricePerMTok) {
				return nil, fmt.Errorf("--prices %s: model %q: %s %v is out of range; want a number of dollars from 0 to %g per million tokens",
					path, m, r.name, *r.v, float64(maxPricePerMTok))
			}
		}
		p := loop.Price{InputPerMTok: *e.Input, OutputPerMTok: *e.Output, CachedInputPerMTok: *e.Input}
		if e.CachedInput != nil {
			p.CachedInputPerMTok = *e.CachedInput
		}
		if e.CacheWrite != nil {
			p.CacheWriteInputPerMTok = *e.CacheWrite
		}
		if e.CacheWrite1h != nil {
			p.CacheWrite1hInputPerMTok = *e.CacheWrite1h
		}
		out[m] = p
	}
	return out, nil
}
