package trace_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/tool"
	"github.com/toolloop/toolloop/trace"
)

type signupIn struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	Tax      string `json:"tax_number"`
	Card     struct {
		Number string `json:"number"`
		Holder string `json:"holder"`
	} `json:"card"`
	Plan  string   `json:"plan"`
	Seats int      `json:"seats"`
	Tags  []string `json:"tags"`
	Trial bool     `json:"trial"`
}

func signupRegistry(t *testing.T) *tool.Registry {
	t.Helper()
	signup := tool.MustNew(tool.Spec[signupIn]{Name: "signup", Effect: tool.Write, Sensitive: []string{"tax_number", "email"}},
		func(context.Context, signupIn) (map[string]string, error) { return nil, nil })
	reg, err := tool.NewRegistry(signup)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

const signupArgs = `{"email":"ada@example.com","password":"hunter2","tax_number":"DE123456789",` +
	`"card":{"number":"4111-1111-1111-1111","holder":"Ada L"},"plan":"pro sk-abcdefghijklmnopqrstu","seats":3,` +
	`"tags":["a","b"],"trial":true}`

var secrets = []string{"ada@example.com", "hunter2", "DE123456789", "4111-1111-1111-1111", "sk-abcdefghijklmnopqrstu"}

func leaks(t *testing.T, what, got string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(got, s) {
			t.Errorf("%s leaks %q: %s", what, s, got)
		}
	}
}

func TestSummaryMasksSensitiveFields(t *testing.T) {
	red := trace.NewRedactor(&trace.RedactOptions{Tools: signupRegistry(t)})
	got := red.Summary("signup", json.RawMessage(signupArgs))
	want := `{"email":"<masked>","password":"<masked>","tax_number":"<masked>",` +
		`"card":"<masked>","plan":"<string:28>","seats":"<number>","tags":"<array:2>","trial":true}`
	if got != want {
		t.Errorf("summary\n got %s\nwant %s", got, want)
	}
	leaks(t, "summary", got)
	if again := red.Summary("signup", json.RawMessage(got)); again != got {
		t.Errorf("summarizing a summary changed it:\n%s\n%s", got, again)
	}
	if string(red.Arguments("signup", json.RawMessage(signupArgs))) != got {
		t.Error("Arguments without full content is not the summary")
	}
	// Another tool knows nothing of signup's sensitive fields, but the key
	// patterns still apply.
	other := red.Summary("other", json.RawMessage(signupArgs))
	if !strings.Contains(other, `"email":"<string:15>"`) || !strings.Contains(other, `"password":"<masked>"`) ||
		!strings.Contains(other, `"card":"<masked>"`) {
		t.Errorf("summary for a tool without sensitive fields: %s", other)
	}
}

func TestFullContentMasks(t *testing.T) {
	red := trace.NewRedactor(&trace.RedactOptions{Tools: signupRegistry(t), FullContent: true})
	got := string(red.Arguments("signup", json.RawMessage(signupArgs)))
	want := `{"email":"<masked>","password":"<masked>","tax_number":"<masked>","card":"<masked>",` +
		`"plan":"pro <masked>","seats":3,"tags":["a","b"],"trial":true}`
	if got != want {
		t.Errorf("full content\n got %s\nwant %s", got, want)
	}
	leaks(t, "full content", got)
	// A dotted path masks one nested field only.
	red = trace.NewRedactor(&trace.RedactOptions{NoDefaultPatterns: true, FullContent: true,
		Sensitive: map[string][]string{"signup": {"card.number"}}})
	got = string(red.Arguments("signup", json.RawMessage(`{"card":{"number":"1","holder":"Ada"},"number":"2"}`)))
	if want := `{"card":{"number":"<masked>","holder":"Ada"},"number":"2"}`; got != want {
		t.Errorf("dotted path: got %s, want %s", got, want)
	}
}

func TestValuePatterns(t *testing.T) {
	red := trace.NewRedactor(nil)
	in := "pay with 4111 1111 1111 1111 or 4111 1111 1111 1112, order 1234567890123 (not a card), key sk-abcdefghijklmnopqrstu, Bearer abcdefghijklmnopqrstuvwxyz"
	got := red.Text(in)
	want := "pay with <masked> or 4111 1111 1111 1112, order 1234567890123 (not a card), key <masked>, <masked>"
	if got != want {
		t.Errorf("text\n got %s\nwant %s", got, want)
	}
	if got := trace.NewRedactor(&trace.RedactOptions{SummarizeText: true}).Text("héllo"); got != "<text:5>" {
		t.Errorf("summarized text %q", got)
	}
	custom := trace.NewRedactor(&trace.RedactOptions{NoDefaultPatterns: true, FullContent: true,
		KeyPatterns: []*regexp.Regexp{regexp.MustCompile(`^pin$`)}, ValuePatterns: []*regexp.Regexp{regexp.MustCompile(`A\d{3}`)}})
	if got := string(custom.Arguments("x", json.RawMessage(`{"PIN":"1234","password":"x","order":"A100"}`))); got != `{"PIN":"<masked>","password":"x","order":"<masked>"}` {
		t.Errorf("custom patterns: %s", got)
	}
}

func TestInvalidArguments(t *testing.T) {
	raw := json.RawMessage(`{"order_id": "A100", oops 4111111111111111`)
	if got := string(trace.NewRedactor(nil).Arguments("t", raw)); got != `"<invalid JSON:42 bytes>"` {
		t.Errorf("summary of invalid JSON: %s", got)
	}
	got := trace.NewRedactor(&trace.RedactOptions{FullContent: true}).Arguments("t", raw)
	var s string
	if err := json.Unmarshal(got, &s); err != nil {
		t.Fatalf("full content of invalid JSON is not a JSON string: %s", got)
	}
	if want := `{"order_id": "A100", oops <masked>`; s != want {
		t.Errorf("full content of invalid JSON: %q, want %q", s, want)
	}
	if got := trace.NewRedactor(nil).Arguments("t", nil); got != nil {
		t.Errorf("empty arguments: %s", got)
	}
}
