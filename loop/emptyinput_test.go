package loop_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/store"
)

// A user message with nothing in it is refused before the run starts: no
// model request, no event, nothing in the store, and an error that names
// the message. Sent on, providers got a request with no contents.
func TestRunRefusesAnEmptyUserMessage(t *testing.T) {
	f := newFixture(t)
	for _, text := range []string{"", " ", "\n\t "} {
		called := false
		model := llm.ModelFunc(func(context.Context, *llm.Request) (*llm.Response, error) {
			called = true
			return nil, errors.New("not to be asked")
		})
		observed := 0
		st := store.NewMemory()
		cfg := loop.Config{Model: model, Tools: f.reg, Store: st,
			Observer: loop.ObserverFunc(func(context.Context, *loop.Event) { observed++ }),
			NewRunID: func() string { return "r1" }}
		msgs := []llm.Message{llm.SystemMessage("be brief"), llm.UserMessage(text)}
		res, err := loop.Run(context.Background(), cfg, msgs)
		if res != nil || err == nil || !strings.Contains(err.Error(), "message 1: the user message is empty") {
			t.Errorf("%q: result %v, error %v; want no result and an error naming message 1", text, res, err)
		}
		if called || observed != 0 {
			t.Errorf("%q: the model was asked (%v), %d events observed", text, called, observed)
		}
		if _, err := st.Events(context.Background(), "r1"); !errors.Is(err, store.ErrUnknownRun) {
			t.Errorf("%q: the store has the run: %v", text, err)
		}
	}
}
