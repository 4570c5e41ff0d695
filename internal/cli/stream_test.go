package cli

import (
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

// firstWrite is a writer that says when it is first written to.
type firstWrite struct {
	mu    sync.Mutex
	b     strings.Builder
	first chan struct{}
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() == 0 && len(p) > 0 {
		close(w.first)
	}
	return w.b.Write(p)
}

// The printer writes the answer as its deltas arrive: the model does not
// produce its last delta until the first piece of text is on standard
// output (it would give up after a while, failing the run).
func TestStreamPrinterWritesAsDeltasArrive(t *testing.T) {
	const answer = "The answer comes in pieces."
	turn := llmtest.Text(answer)
	last := len(llmtest.Deltas(turn.Response)) - 1
	out := &firstWrite{first: make(chan struct{})}
	turn.OnDelta = func(ctx context.Context, i int) error {
		if i < last {
			return nil
		}
		select {
		case <-out.first:
			return nil
		case <-time.After(2 * time.Second):
			return errors.New("nothing was printed before the stream's last delta")
		}
	}
	var errw strings.Builder
	p := &streamPrinter{out: out, errw: &errw}
	reg, err := tool.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	res, err := loop.Run(context.Background(), loop.Config{Model: llmtest.New(turn), Tools: reg, Stream: true, Watch: p.watch},
		[]llm.Message{llm.UserMessage("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.b.String(); got != answer+"\n" || !p.answered(res) {
		t.Errorf("printed %q (answered %v), want the answer and a newline", got, p.answered(res))
	}
}

// toolloop run streams the sandbox's answer and shows each tool call on
// standard error; --no-stream prints the same standard output, at the
// end, and no tool activity.
func TestRunStreamAndNoStream(t *testing.T) {
	runID := regexp.MustCompile(`run=\S+`)
	var outs [2]string
	for i, extra := range [][]string{nil, {"--no-stream"}} {
		dir := t.TempDir()
		args := append([]string{"run", "--provider", "sandbox", "--tools", "orders", "--db", filepath.Join(dir, "t.db"), "--log", dir}, extra...)
		code, out, errOut := call(append(args, "refund A103 please")...)
		if code != exitOK {
			t.Fatalf("%v: exit %d\n%s%s", extra, code, out, errOut)
		}
		outs[i] = runID.ReplaceAllString(out, "run=ID")
		if extra == nil {
			if !regexp.MustCompile(`^toolloop: tool refund_order \(desk_1_1\): ok in \d\S*s\n$`).MatchString(errOut) {
				t.Errorf("streamed: stderr %q, want one line for the refund", errOut)
			}
		} else if errOut != "" {
			t.Errorf("--no-stream: stderr %q, want nothing", errOut)
		}
	}
	if outs[0] != outs[1] || !strings.Contains(outs[0], "refund_order (desk_1_1): done") {
		t.Errorf("streamed stdout\n%s\n--no-stream stdout\n%s", outs[0], outs[1])
	}
}
