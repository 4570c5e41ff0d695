package console

import "time"

// SetTick makes s's followers poll when tick sends, not on a timer. Call
// it before the first live stream.
func SetTick(s *Server, tick <-chan time.Time) { s.tick = tick }

// Pollers returns how many followers' goroutines run.
func Pollers(s *Server) int64 { return s.pollers.Load() }
