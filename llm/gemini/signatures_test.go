package gemini

import (
	"fmt"
	"testing"
)

func TestSignaturesForgetOldestFirst(t *testing.T) {
	s := newSignatures(3)
	for i := range 5 {
		s.put(fmt.Sprint("c", i), "tool", []byte{byte(i)})
	}
	for i := range 5 {
		got := s.get(fmt.Sprint("c", i), "tool")
		if kept := i >= 2; (got != nil) != kept || kept && got[0] != byte(i) {
			t.Fatalf("c%d: got %v, want kept=%v", i, got, kept)
		}
	}
	if s.get("c4", "other_tool") != nil {
		t.Fatal("a signature was returned for a call naming another tool")
	}
	s.put("c4", "tool", []byte{9}) // overwriting does not evict
	if s.get("c2", "tool") == nil || s.get("c4", "tool")[0] != 9 {
		t.Fatal("overwrite changed the table's contents")
	}
	if len(s.byID) != 3 {
		t.Fatalf("table holds %d entries, want 3", len(s.byID))
	}
}
