package loop

import "testing"

// A size hint follows a longer run at once, a shorter one by an eighth a
// run, and stays within its bounds.
func TestSizeHint(t *testing.T) {
	var h sizeHint
	if got := h.get(16); got != 16 {
		t.Fatalf("before any run: %d, want the default 16", got)
	}
	for _, step := range []struct{ note, want int }{
		{28, 28},   // the first run
		{10, 25},   // a shorter one: 28 less an eighth (3)
		{100, 100}, // a longer one, at once
		{28, 88},
		{28, 77},
		{1, 68},
		{5000, maxSizeHint},
	} {
		h.note(step.note)
		if got := h.get(16); got != step.want {
			t.Fatalf("after a run of %d: %d, want %d", step.note, got, step.want)
		}
	}
	var short sizeHint
	short.note(0)
	if got := short.get(16); got != minSizeHint {
		t.Fatalf("after an empty run: %d, want %d", got, minSizeHint)
	}
}
