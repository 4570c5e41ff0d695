package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/trace"
)

// mendLog brings the run log at path up to the run's log in the store
// (stored, from its first event), when the file lags behind it: a process
// killed after a commit and before the matching lines reached the file
// leaves it short for good, and trace then says the run never stopped.
// The lines in the file stay as they are; a last line cut off mid-way
// (not a line yet) is replaced by the whole event, and the events after
// the file's last line are appended in the file's own encoding, in one
// write. A file that is not a prefix of the stored log (another run's, or
// edited) is left alone, and so is a missing one. It returns how many
// events it added.
func mendLog(path string, stored []loop.Event) (int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	whole := b[:bytes.LastIndexByte(b, '\n')+1]
	inFile, err := trace.ReadLog(bytes.NewReader(whole))
	if err != nil {
		return 0, fmt.Errorf("%s: not mended: %w", path, err)
	}
	if len(inFile) > len(stored) {
		return 0, nil // the store is the one behind: nothing to add
	}
	for i := range inFile {
		if inFile[i].Seq != stored[i].Seq || inFile[i].Kind != stored[i].Kind || !inFile[i].At.Equal(stored[i].At) {
			return 0, fmt.Errorf("%s: not mended: its event %d is not the store's (%s at %s there, %s at %s in the store)",
				path, i+1, inFile[i].Kind, inFile[i].At, stored[i].Kind, stored[i].At)
		}
	}
	if len(inFile) == len(stored) && len(whole) == len(b) {
		return 0, nil
	}
	var buf bytes.Buffer
	w := trace.NewLogWriter(&buf, nil) // as newObservers' FileObserver writes
	for i := len(inFile); i < len(stored); i++ {
		w.Observe(context.Background(), &stored[i])
	}
	if err := w.Err(); err != nil {
		return 0, fmt.Errorf("%s: not mended: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return 0, err
	}
	// Only the cut line goes: the whole lines before it stay.
	if err := f.Truncate(int64(len(whole))); err != nil {
		f.Close()
		return 0, err
	}
	if _, err := f.WriteAt(buf.Bytes(), int64(len(whole))); err != nil {
		f.Close()
		return 0, fmt.Errorf("%s: mending: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	return len(stored) - len(inFile), nil
}

// mendRunLog mends runID's log in the log directory dir ("" for none)
// from events, the run's log in the store, and says so on stderr when it
// added lines or could not.
func (c *cli) mendRunLog(cmd, dir string, events []loop.Event) {
	if dir == "" || len(events) == 0 || events[0].Start == nil {
		return
	}
	runID := events[0].Start.RunID
	if runID == "" || runID != filepath.Base(runID) {
		return
	}
	path := filepath.Join(dir, runID+trace.LogExt)
	n, err := mendLog(path, events)
	switch {
	case err != nil:
		fmt.Fprintf(c.stderr, "toolloop %s: note: the run log %s lags behind the store and was left as it is: %v\n", cmd, path, err)
	case n > 0:
		fmt.Fprintf(c.stderr, "toolloop %s: note: the run log %s lacked the last %d events of the store's log (its writer died); they were added\n", cmd, path, n)
	}
}
