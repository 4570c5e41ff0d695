package tool_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

func TestLimitsCheck(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	l := tool.Limits{MaxBytes: 64, MaxDepth: 3}
	for _, tc := range []struct {
		args, problem string
	}{
		{`{"a":[1,{"b":2}]}`, ""},
		{`{"a":"[[[[[[{{{{"}`, ""},                   // brackets in a string do not nest
		{`{"a":"\"[[[[","b":[[1]]}`, ""},             // nor after an escaped quote
		{`{"a":[[[1]]]}`, "more than 3 levels deep"}, // level 4
		{deep(4), "more than 3 levels deep"},
		{`{"a":[[[[` + strings.Repeat(`x`, 80), "more than the limit of 64 bytes"}, // size first, valid or not
		{``, ""},
	} {
		err := l.Check([]byte(tc.args))
		var te *tool.Error
		switch {
		case tc.problem == "" && err != nil:
			t.Errorf("%.30s: %v", tc.args, err)
		case tc.problem != "" && (!errors.As(err, &te) || te.Kind != llm.KindInvalidArguments || !strings.Contains(te.Msg, tc.problem)):
			t.Errorf("%.30s: %v, want %q", tc.args, err, tc.problem)
		}
	}
	if err := (tool.Limits{}).Check([]byte(deep(20000))); err != nil {
		t.Errorf("zero limits refused: %v", err)
	}
}
