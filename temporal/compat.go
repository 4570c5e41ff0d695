package temporal

import "time"

// remaining is the time left before deadline at now; zero deadline means
// no bound (ok=false).
func remaining(deadline, now time.Time) (d time.Duration, ok bool) {
	if deadline.IsZero() {
		return 0, false
	}
	return deadline.Sub(now), true
}
