package loop_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

// goroutineID reads the calling goroutine's ID from its stack header
// ("goroutine 42 [running]:"). Tests only: the ID is there for debugging.
func goroutineID(t *testing.T) int {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, err := strconv.Atoi(string(b[:bytes.IndexByte(b, ' ')]))
	if err != nil {
		t.Fatalf("reading the goroutine ID from %q: %v", buf, err)
	}
	return id
}

// whereTool returns a read tool that records which goroutine ran it.
func whereTool(t *testing.T, name string, honors bool, ran chan<- int) *tool.Tool {
	return tool.MustNew(tool.Spec[struct{}]{Name: name, HonorsContext: honors},
		func(context.Context, struct{}) (string, error) {
			ran <- goroutineID(t)
			return "ok", nil
		})
}

// A tool that honors its context runs on the goroutine that called Run;
// any other runs on one of its own, which Run can leave behind.
func TestHandlerGoroutine(t *testing.T) {
	ran := make(chan int, 2)
	reg, err := tool.NewRegistry(whereTool(t, "honors", true, ran), whereTool(t, "does_not", false, ran))
	if err != nil {
		t.Fatal(err)
	}
	model := llmtest.New(llmtest.Calls(call("c1", "honors", `{}`)), llmtest.Calls(call("c2", "does_not", `{}`)), llmtest.Text("done"))
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: reg}, user("q"))
	mustStatus(t, res, err, loop.FinalAnswer)
	caller, honoring, other := goroutineID(t), <-ran, <-ran
	if honoring != caller || other == caller {
		t.Fatalf("Run on goroutine %d; the honoring tool ran on %d (want the same), the other on %d (want another)", caller, honoring, other)
	}
}

func TestHonoringToolTimesOutThroughItsContext(t *testing.T) {
	var handlerErr error
	patient := tool.MustNew(tool.Spec[struct{}]{Name: "patient", Timeout: 20 * time.Millisecond, HonorsContext: true},
		func(ctx context.Context, _ struct{}) (string, error) {
			<-ctx.Done()
			handlerErr = ctx.Err()
			return "", ctx.Err()
		})
	reg, err := tool.NewRegistry(patient)
	if err != nil {
		t.Fatal(err)
	}
	model := llmtest.New(llmtest.Calls(call("c1", "patient", `{}`)), llmtest.Text("unreached"))
	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: reg}, user("q"))
	mustStatus(t, res, err, loop.ToolTimeout)
	if !errors.Is(handlerErr, context.DeadlineExceeded) {
		t.Fatalf("the handler's context ended with %v, want its deadline", handlerErr)
	}
	if r := resultFor(t, res.Messages, "c1"); r.ErrorKind != llm.KindTimeout {
		t.Fatalf("c1 = %+v", r)
	}
}

// A tool that declares it honors its context and then ignores it holds Run
// until it returns; the run's outcome is the timeout all the same, as it is
// for an undeclared tool that Run leaves behind.
func TestFalselyHonoringToolHoldsRunButTimesOut(t *testing.T) {
	for _, honors := range []bool{true, false} {
		t.Run("honors="+strconv.FormatBool(honors), func(t *testing.T) {
			ctxs, release := make(chan context.Context, 1), make(chan struct{})
			liar := tool.MustNew(tool.Spec[struct{}]{Name: "liar", Timeout: 20 * time.Millisecond, HonorsContext: honors},
				func(ctx context.Context, _ struct{}) (string, error) {
					ctxs <- ctx
					<-release
					return "late", nil
				})
			reg, err := tool.NewRegistry(liar)
			if err != nil {
				t.Fatal(err)
			}
			model := llmtest.New(llmtest.Calls(call("c1", "liar", `{}`)), llmtest.Text("unreached"))
			type ran struct {
				res *loop.Result
				err error
			}
			done := make(chan ran, 1)
			go func() {
				res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: reg, Planner: executor.SerialPlanner()}, user("q"))
				done <- ran{res, err}
			}()
			// The call's context ends at its timeout, which the handler ignores.
			<-(<-ctxs).Done()
			var got ran
			if honors {
				select {
				case got = <-done:
					t.Fatalf("Run returned (%v) while the handler it runs on was still blocked", got.err)
				case <-time.After(50 * time.Millisecond):
				}
				close(release)
				got = <-done
			} else {
				// Left behind: Run returns while the handler is blocked.
				select {
				case got = <-done:
					close(release)
				case <-time.After(10 * time.Second):
					close(release)
					t.Fatal("Run waited for a handler that ignores its context")
				}
			}
			mustStatus(t, got.res, got.err, loop.ToolTimeout)
			if r := resultFor(t, got.res.Messages, "c1"); r.ErrorKind != llm.KindTimeout {
				t.Fatalf("c1 = %+v", r)
			}
			time.Sleep(10 * time.Millisecond) // for goleak: the handler's goroutine ends
		})
	}
}
