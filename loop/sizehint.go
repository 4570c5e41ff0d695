package loop

import "sync/atomic"

// sizeHint remembers how long a Runner's recent runs made a slice (their
// logs' events, their histories' messages), so that the next run makes
// room for a typical run in one step rather than growing the slice, and
// copying it, as it goes: a log that doubles from 16 events holds 28
// events (a run of 5 tool turns) in 8 KB after 4 KB of garbage, and a
// history of 22 messages had copied itself three times. It is a capacity
// only, never a limit: a longer run grows its slice as before, a shorter
// one leaves room unused. Concurrent runs read and note it without order;
// whatever it holds is a valid hint.
type sizeHint struct{ n atomic.Int32 }

// Bounds of a hint: the smallest capacity worth remembering, and the
// largest a run is given up front (a run that grew longer grows again).
const (
	minSizeHint = 4
	maxSizeHint = 256
)

// get returns the capacity to make: the hint, or def before any run has
// noted one.
func (h *sizeHint) get(def int) int {
	if n := int(h.n.Load()); n > 0 {
		return n
	}
	return def
}

// note records that a run ended with n elements. The hint follows longer
// runs at once and shorter ones by an eighth a run, so that a mix of short
// and long runs keeps room for the long ones, and one rare long run is
// soon forgotten.
func (h *sizeHint) note(n int) {
	old := int(h.n.Load())
	n = min(max(n, old-old/8, minSizeHint), maxSizeHint)
	if n != old {
		h.n.Store(int32(n))
	}
}
