package temporal_test

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"

	"github.com/toolloop/toolloop/temporal"
)

// TestReplayRecordedHistories replays every workflow history recorded in
// testdata/histories (by the dev-server test with -temporal.record, or
// exported with `temporal workflow show --output json`) against the
// current workflow code: a change that makes RunLoop non-deterministic
// for runs already in flight fails here.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Skip("no recorded histories in testdata/histories (record them with the dev-server test, see README.md)")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			temporal.RegisterWorkflow(r)
			if err := r.ReplayWorkflowHistoryFromJSONFile(testLogger(), f); err != nil {
				t.Fatal(err)
			}
		})
	}
}
