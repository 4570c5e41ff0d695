package cli

import (
	"bytes"
	"context"
	"flag"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolloop/toolloop/console"
	"github.com/toolloop/toolloop/examples/orders"
	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/store"
)

// fakeDriver makes fake backends, selected by --fake NAME: the order desk
// in memory, every write waiting for a person, and a paused run that goes
// on by itself once its calls are answered, as a workflow does. It shows
// that each command is written once: the same command line, with the
// local backend's flags or with --fake, prints the same.
type fakeDriver struct{ b *fake }

func (d fakeDriver) Flags(cmd string, fs *flag.FlagSet) Opener {
	fs.StringVar(&d.b.name, "fake", "", "the fake backend's `NAME`")
	return func(context.Context, *Kit) (Backend, error) {
		if cmd == "resume" {
			return nil, Usagef("the fake backend needs no resume")
		}
		return d.b, nil
	}
}

type fake struct {
	name   string
	runner *loop.Runner
	log    *store.Memory
}

func newFake(t *testing.T) *fake {
	reg, err := orders.Tools(orders.NewBook())
	if err != nil {
		t.Fatal(err)
	}
	log := store.NewMemory()
	r, err := loop.NewRunner(loop.Config{Model: orders.DeskModel(), ModelName: orders.DeskModelName, Tools: reg,
		Policy: policy.ConfirmWrites(), Executor: executor.New(&executor.Options{Ledger: log}), Store: log,
		SessionID: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	return &fake{runner: r, log: log}
}

func (f *fake) Start(ctx context.Context, req *Request) (*loop.Result, error) {
	if req.Model != orders.DeskModelName {
		return nil, Usagef("the fake backend has only model %s", orders.DeskModelName)
	}
	res, err := f.runner.Run(ctx, req.Messages(""))
	if res == nil {
		return nil, err
	}
	return res, nil
}

func (f *fake) Runs(ctx context.Context, flt console.Filter) ([]console.Run, error) {
	list, err := f.log.Runs(ctx, flt.Status)
	if err != nil {
		return nil, err
	}
	return console.SummaryRuns(list)
}

func (f *fake) Events(ctx context.Context, runID string) ([]loop.Event, error) {
	return loadRun(ctx, f.log, runID)
}

func (f *fake) Decide(ctx context.Context, runID string, answer loop.Confirmation) error {
	if err := loop.Decide(ctx, f.log, runID, answer, time.Now()); err != nil {
		return err
	}
	_, err := f.runner.Resume(ctx, runID) // goes on once every call is answered
	return err
}

func (f *fake) Resume(context.Context, string) (*loop.Result, error) {
	return nil, Usagef("the fake backend needs no resume")
}

func (f *fake) Info() Info {
	return Info{Flags: " --fake " + f.name, Where: "on " + f.name, GoesOn: true}
}

func (f *fake) Close() error { return nil }

// TestSameOnBothBackends runs one story on the local backend and on the
// fake one: a refund paused for confirmation, a wrong answer, the
// approval, the list of runs and the trace. What they print differs only
// in the run's ID, the flags that name the backend, and what goes on after
// an answer (toolloop resume locally, nothing on the fake).
func TestSameOnBothBackends(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "t.db")
	logs := t.TempDir()
	fk := newFake(t)
	ext := &Extension{Flag: "fake", Driver: fakeDriver{fk}}
	type backendCase struct {
		name  string
		flags []string // select the backend, and its run's model and tools
		run   []string // run's flags of its own
	}
	var outs [2][]string
	for i, bc := range []backendCase{ // a system prompt of their own, so that both use as many tokens
		{"local", []string{"--db", db}, []string{"--provider", "sandbox", "--tools", "orders", "--confirm-writes", "--log", logs}},
		{"fake", []string{"--fake", "F"}, []string{"--model", orders.DeskModelName}},
	} {
		do := func(args ...string) string {
			var out, errb bytes.Buffer
			code := Main(ctx, append(args, bc.flags...), &out, &errb, func(string) string { return "" }, ext)
			return strings.Join([]string{string(rune('0' + code)), out.String(), errb.String()}, "|")
		}
		res := do(append([]string{"run", "--system", "You are the order desk.", "Please refund A103"}, bc.run...)...)
		runID := regexp.MustCompile(` run=(\S+)`).FindStringSubmatch(res)
		if runID == nil {
			t.Fatalf("%s: run printed %q", bc.name, res)
		}
		id := runID[1]
		steps := []string{
			res,
			do("approve", id, "desk_9_9", "--by", "ops"),
			do("approve", id, "desk_1_1"),
			do("approve", id, "desk_1_1", "--by", "ops"),
			do("deny", id, "desk_1_1", "--by", "erin"),
		}
		if bc.name == "local" {
			if code := do("resume", id, "--provider", "sandbox", "--model", orders.DeskModelName, "--tools", "orders", "--confirm-writes", "--log", logs); code[0] != '0' {
				t.Fatalf("resume: %s", code)
			}
		}
		steps = append(steps,
			do("runs", "--status", "final_answer"),
			do("approve", "run-nope", "c", "--by", "ops"),
			do("trace", "diagnose", id),
			do("trace", "show", "nope"),
		)
		// Normalize: the run's ID, the backend's flags and place, the
		// time a run started and the table's widths.
		for _, s := range steps {
			s = strings.ReplaceAll(s, id, "RUN")
			s = strings.ReplaceAll(s, " "+strings.Join(bc.flags, " "), " BACKEND")
			s = strings.ReplaceAll(s, "in "+db, "on F")
			s = strings.ReplaceAll(s, "on F", "WHERE")
			s = regexp.MustCompile(`\d{4}-\d\d-\d\dT\S+Z`).ReplaceAllString(s, "TIME")
			s = regexp.MustCompile(` +`).ReplaceAllString(s, " ")
			outs[i] = append(outs[i], s)
		}
	}
	for j := range outs[0] {
		local, fake := outs[0][j], outs[1][j]
		// Only the backend that drives the run in this process shows
		// its tool calls as they go.
		local = regexp.MustCompile(`(?m)(^|\|)toolloop: tool [^\n]*\n`).ReplaceAllString(local, "$1")
		// What goes on after an answer differs by design.
		local = regexp.MustCompile(`toolloop resume RUN BACKEND[^\n|]*`).ReplaceAllString(local, "NEXT")
		local = strings.ReplaceAll(local, "# to approve and go on:", "# to approve:")
		local = strings.ReplaceAll(local, " and go on:", ":")
		local = strings.ReplaceAll(local, "go on with: NEXT", "NEXT")
		local = strings.ReplaceAll(local, "resume the run with: NEXT", "NEXT")
		local = regexp.MustCompile(`(?m)^NEXT\n`).ReplaceAllString(local, "")
		fake = strings.ReplaceAll(fake, "# the run waits WHERE; to approve (it goes on once every call is answered):", "# to approve:")
		fake = strings.ReplaceAll(fake, "the run goes on; follow it with: toolloop trace show BACKEND RUN", "NEXT")
		// The session column: the fake records "fake".
		fake = strings.Replace(fake, " fake ", " run:sandbox:"+orders.DeskModelName+" ", 1)
		if local != fake {
			t.Errorf("step %d differs:\nlocal: %q\nfake:  %q", j+1, local, fake)
		}
	}
}

// racingFake is the fake backend where someone else answers each call a
// moment before the command's own answer reaches the store.
type racingFake struct{ *fake }

func (f racingFake) Decide(ctx context.Context, runID string, answer loop.Confirmation) error {
	if err := loop.Decide(ctx, f.log, runID, loop.Confirmation{CallID: answer.CallID, By: "bob"}, time.Now()); err != nil {
		return err
	}
	return f.fake.Decide(ctx, runID, answer)
}

type racingDriver struct{ b racingFake }

func (d racingDriver) Flags(cmd string, fs *flag.FlagSet) Opener {
	fs.StringVar(&d.b.name, "fake", "", "the fake backend's `NAME`")
	return func(context.Context, *Kit) (Backend, error) { return d.b, nil }
}

// An approval that loses a race gets the same line and exit status as one
// that comes after the other answer: one message per cause.
func TestApprovalThatLosesARace(t *testing.T) {
	ctx := context.Background()
	fk := newFake(t)
	do := func(ext *Extension, args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := Main(ctx, append(args, "--fake", "F"), &out, &errb, func(string) string { return "" }, ext)
		return code, errb.String()
	}
	var out, errb bytes.Buffer
	if code := Main(ctx, []string{"run", "--fake", "F", "--model", orders.DeskModelName, "Please refund A103"}, &out, &errb,
		func(string) string { return "" }, &Extension{Flag: "fake", Driver: fakeDriver{fk}}); code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", code, &out, &errb)
	}
	id := regexp.MustCompile(` run=(\S+)`).FindStringSubmatch(out.String())[1]
	pending := regexp.MustCompile(`(desk_\d+_\d+)`).FindStringSubmatch(out.String())
	if pending == nil {
		t.Fatalf("no pending call in:\n%s", &out)
	}
	raced, lost := do(&Extension{Flag: "fake", Driver: racingDriver{racingFake{fk}}}, "approve", id, pending[1], "--by", "alice")
	late, after := do(&Extension{Flag: "fake", Driver: fakeDriver{fk}}, "approve", id, pending[1], "--by", "alice")
	if raced != exitUsage || late != exitUsage || lost != after || !strings.Contains(lost, "already denied by bob") {
		t.Errorf("lost the race: exit %d %q\ncame after:   exit %d %q\nwant exit 2 and the same line naming bob", raced, lost, late, after)
	}
}
