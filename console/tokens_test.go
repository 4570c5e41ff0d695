package console_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/console/consoletest"
	"github.com/toolloop/toolloop/loop"
)

// TestRunPageTokens: a run's page has its token account: a row per model
// turn with its input split into cache reads, cache writes and new input,
// a row per clearing between them, the turn after each clearing marked as
// a cache miss the clearing explains, and a total; the timeline draws the
// clearings. A run whose turns report no tokens has no such table.
func TestRunPageTokens(t *testing.T) {
	e := newEnv(t, nil)
	run, err := consoletest.Cached(context.Background(), e.mem)
	if err != nil {
		t.Fatal(err)
	}
	events := e.events(run)
	var clearings []int
	turns := 0
	for i, ev := range events {
		switch ev.Kind {
		case loop.ModelResponded:
			turns++
		case loop.ContextEdited:
			clearings = append(clearings, i)
		}
	}
	if len(clearings) == 0 {
		t.Fatal("the run cleared nothing")
	}
	_, page := e.do(req{path: "/runs/" + run, token: aliceToken})
	for what, n := range map[string]int{"turn": turns, "clearing": len(clearings), "total": 1} {
		if got := strings.Count(page, `data-testid="token-row" data-what="`+what+`"`); got != n {
			t.Errorf("%d %s rows, want %d", got, what, n)
		}
	}
	// The turn after the first clearing: its split, and the clearing named
	// as the expected cause of its miss.
	edit, next := events[clearings[0]], events[clearings[0]+1]
	u := next.Response.Usage
	row := regexp.MustCompile(`(?s)<tr class="t-turn miss-expected" data-testid="token-row" data-what="turn" data-seq="` +
		fmt.Sprint(next.Seq) + `">.*?</tr>`).FindString(page)
	want := fmt.Sprintf(`<td class="n">%d</td><td class="n">%d</td><td class="n">%d</td><td class="n">%d</td>`,
		u.InputTokens, u.CachedInputTokens, u.CacheWriteTokens, u.InputTokens-u.CachedInputTokens-u.CacheWriteTokens)
	if !strings.Contains(row, want) || !strings.Contains(row, fmt.Sprintf("expected: the clearing at seq %d replaced the result of call c1", edit.Seq)) {
		t.Errorf("the row of the turn after the clearing:\n%s\nwant %s and the clearing named", row, want)
	}
	if strings.Contains(page, `class="t-turn miss"`) {
		t.Errorf("a miss no edit explains")
	}
	if !strings.Contains(page, `data-what="clearing" data-seq="`+fmt.Sprint(edit.Seq)+`">`) || !strings.Contains(page, "cleared 4 tool result(s) (window): c1 (fetch_page), c2 (fetch_page)") {
		t.Errorf("the page lacks the clearing's row")
	}
	if !strings.Contains(page, `class="span k-edit_context"`) {
		t.Errorf("the timeline does not draw the clearings")
	}
	// The API has the same account.
	var doc struct {
		Tokens []struct {
			Seq       int    `json:"seq"`
			What      string `json:"what"`
			Input     int64  `json:"input"`
			CacheRead int64  `json:"cache_read"`
			Expected  bool   `json:"expected"`
		} `json:"tokens"`
	}
	e.getJSON("/api/runs/"+run, &doc)
	kinds := map[string]int{}
	for _, r := range doc.Tokens {
		kinds[r.What]++
		if r.Seq == next.Seq && (r.Input != u.InputTokens || r.CacheRead != u.CachedInputTokens || !r.Expected) {
			t.Errorf("API row of the turn after the clearing: %+v; want input %d, cache_read %d, expected", r, u.InputTokens, u.CachedInputTokens)
		}
	}
	if kinds["turn"] != turns || kinds["clearing"] != len(clearings) || kinds["total"] != 1 {
		t.Errorf("API token rows by kind %v; want %d turns, %d clearings, 1 total", kinds, turns, len(clearings))
	}
	normal := e.scenario("normal")
	_, page = e.do(req{path: "/runs/" + normal, token: aliceToken})
	if strings.Contains(page, `data-testid="tokens"`) {
		t.Errorf("a run without tokens has a token table")
	}
	if _, body := e.do(req{path: "/api/runs/" + normal + "?events=0", token: aliceToken}); strings.Contains(body, `"tokens":[`) {
		t.Errorf("the API has a token account for a run without tokens: %s", body)
	}
}
