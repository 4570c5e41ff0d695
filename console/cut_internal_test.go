package console

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCutStrings: long strings are cut between characters, never inside
// an escape or a UTF-8 sequence, and end with a note; the result is valid
// JSON that decodes to a prefix of each string; base64 stays base64;
// short strings, keys and the rest of the document are kept.
func TestCutStrings(t *testing.T) {
	long := strings.Repeat(`a"b\c é😀`+"\n\t\u2028<", 300) // escapes of every kind, multi-byte runes
	blob := []byte(strings.Repeat("\x00\xff binary", 500))
	doc, err := json.Marshal(map[string]any{"text": long, "short": "kept", "blob": blob, "n": 1.5, "list": []string{long, "x"}})
	if err != nil {
		t.Fatal(err)
	}
	for limit := 100; limit < 140; limit++ { // every cut position across the escapes
		cut := cutStrings(doc, limit, "/api/runs/r/events/2")
		var got struct {
			Text  string   `json:"text"`
			Short string   `json:"short"`
			Blob  []byte   `json:"blob"`
			N     float64  `json:"n"`
			List  []string `json:"list"`
		}
		if err := json.Unmarshal(cut, &got); err != nil {
			t.Fatalf("limit %d: the cut document does not decode: %v\n%s", limit, err, cut)
		}
		for _, s := range []string{got.Text, got.List[0]} {
			head, note, ok := strings.Cut(s, " … [cut by the console: ")
			if !ok || !strings.HasPrefix(long, head) || len(head) < limit/3 || !strings.Contains(note, "whole at /api/runs/r/events/2]") {
				t.Fatalf("limit %d: cut text %q", limit, s)
			}
		}
		if got.Short != "kept" || got.N != 1.5 || got.List[1] != "x" || len(got.Blob) == 0 || !strings.HasPrefix(string(blob), string(got.Blob)) {
			t.Fatalf("limit %d: %+v", limit, got)
		}
	}
	if got := cutStrings(doc, len(doc), "x"); string(got) != string(doc) {
		t.Errorf("a document with no long string changed")
	}
}

// TestWriteJSONUnencodable: an answer that cannot be encoded is a 500
// that says why, not a 200 with an empty body.
func TestWriteJSONUnencodable(t *testing.T) {
	w := httptest.NewRecorder()
	writeJSON(w, http.StatusOK, map[string]float64{"cost": math.Inf(1)})
	var body map[string]string
	if err := json.Unmarshal(w.Body.Bytes(), &body); w.Code != http.StatusInternalServerError || err != nil ||
		!strings.Contains(body["error"], "could not be encoded as JSON") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}
