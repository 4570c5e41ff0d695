package anthropic

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any leaves a goroutine behind: a
// stream not closed after a consumer's break or a dropped connection
// would.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
