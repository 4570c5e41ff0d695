package gemini_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Streams hold connections and the goroutines that read them: none may
// outlive its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
