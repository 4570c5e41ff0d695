package loop

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/tool"
)

// DefaultOutputRetries is how many times, by default, a final answer that
// does not match the run's output schema goes back to the model with what
// was wrong before the run stops with invalid_output.
const DefaultOutputRetries = 2

// DefaultOutputName names an output schema that Config.OutputName leaves
// unnamed, where a provider asks for a name.
const DefaultOutputName = "answer"

// OutputSpec is a run's output schema as its log records it (StartInfo),
// so that a replay or a resume holds answers to the schema the run
// started with, whatever its driver's configuration says now.
type OutputSpec struct {
	// Name and Strict are sent to the provider (llm.OutputFormat).
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict,omitempty"`
	// Retries is how many answers that do not match go back to the model
	// with what was wrong (0: none).
	Retries int `json:"retries"`
}

var outputName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// NewOutputSpec checks an output schema and fills in the defaults: an
// empty name is DefaultOutputName, zero retries are DefaultOutputRetries
// and negative ones none. The schema is compiled (tool.CompileOutputSchema)
// so that a schema the validator refuses is an error here, before a run
// starts. Both drivers build their OutputSpec with it.
func NewOutputSpec(schema json.RawMessage, name string, strict bool, retries int) (*OutputSpec, error) {
	if _, err := tool.CompileOutputSchema(schema); err != nil {
		return nil, err
	}
	if name == "" {
		name = DefaultOutputName
	}
	if !outputName.MatchString(name) {
		return nil, fmt.Errorf("output schema name %q: want 1 to 64 letters, digits, '_' or '-'", name)
	}
	switch {
	case retries == 0:
		retries = DefaultOutputRetries
	case retries < 0:
		retries = 0
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, schema); err != nil {
		return nil, fmt.Errorf("output schema is not JSON: %w", err)
	}
	return &OutputSpec{Name: name, Schema: compact.Bytes(), Strict: strict, Retries: retries}, nil
}

// Format is what a model request carries to ask for the answer in shape:
// nil for a nil spec.
func (o *OutputSpec) Format() *llm.OutputFormat {
	if o == nil {
		return nil
	}
	return &llm.OutputFormat{Name: o.Name, Schema: o.Schema, Strict: o.Strict}
}

// OutputJSON returns the JSON of a final answer's text: the text without
// the white space around it and, if the whole answer is one Markdown code
// block (a model held to a schema only by its instructions often writes
// "```json ... ```"), without the fences.
func OutputJSON(text string) []byte {
	b := bytes.TrimSpace([]byte(text))
	if !bytes.HasPrefix(b, []byte("```")) || !bytes.HasSuffix(b, []byte("```")) || len(b) < 6 {
		return b
	}
	inner := b[3 : len(b)-3]
	nl := bytes.IndexByte(inner, '\n')
	if nl < 0 || bytes.Contains(inner, []byte("```")) {
		return b
	}
	// The info string ("json") is the rest of the opening line.
	return bytes.TrimSpace(inner[nl+1:])
}

// checkOutput holds a final answer (msg, already in the history; truncated
// if it stopped at the output token limit) to the run's output schema. It reports ok when the answer matches, or when
// the run has no schema; otherwise it returns the effect that follows:
// another model turn, after a user message that says what was wrong, or
// a stop with invalid_output once the corrections are spent or no turn
// is left for one. The rejected answer stays in its model_responded
// event and in the history, where the model reads it with the errors.
func checkOutput(s *State, msg *llm.Message, truncated bool) (Effect, bool) {
	if s.Output == nil {
		return Effect{}, true
	}
	problem := outputProblem(s.Output, s.Budgets.ArgumentLimits(), msg.Text)
	if problem == "" {
		return Effect{}, true
	}
	if truncated {
		// Most often why JSON breaks off: the model should answer shorter.
		problem += " (the answer was cut off at the output token limit)"
	}
	s.OutputRejected++
	b := &s.Budgets
	switch {
	case s.OutputRejected > s.Output.Retries:
		return stop(s, InvalidOutput, fmt.Sprintf("answer %d of %d allowed was refused: %s",
			s.OutputRejected, s.Output.Retries+1, problem)), false
	case s.Steps >= b.MaxSteps:
		return stop(s, InvalidOutput, fmt.Sprintf("the answer of turn %d of %d was refused, and no turn is left to correct it: %s",
			s.Steps, b.MaxSteps, problem)), false
	case b.MaxTokens > 0 && s.Usage.Total() >= b.MaxTokens, b.MaxCost > 0 && s.Cost >= b.MaxCost:
		return stop(s, InvalidOutput, "the answer was refused, and the token or cost budget leaves no turn to correct it: "+problem), false
	}
	m := llm.Message{Role: llm.RoleUser, Text: OutputCorrection(problem)}
	if s.ctx != nil {
		// Context management counts every message of the history, by its
		// index: one it missed would shift where a compaction cuts.
		s.ctx.add(&m)
	}
	s.Messages = append(s.Messages, m)
	return beforeRequest(s), false
}

// outputProblem says what is wrong with answer, or "". The schema was
// compiled when the run was configured; a log whose schema does not
// compile (written by hand) rejects every answer, saying why.
func outputProblem(o *OutputSpec, l tool.Limits, answer string) string {
	schema, err := tool.CompileOutputSchema(o.Schema)
	if err != nil {
		return err.Error()
	}
	if err := schema.Check(OutputJSON(answer), l); err != nil {
		return err.Error()
	}
	return ""
}

// OutputCorrection is the user message that sends an answer that does not
// match the output schema back to the model, with what was wrong
// (problem, at most about a kilobyte: tool.OutputSchema.Check bounds it).
func OutputCorrection(problem string) string {
	return "Your answer was refused: " + problem +
		". Reply again with only a JSON value that matches the required output schema, and no other text."
}

// ErrNoOutput is Decode's error for a run that ended with a final answer
// but had no output schema, so that its answer is text.
var ErrNoOutput = errors.New("loop: the run has no output schema; its answer is text (Result.Answer)")

// Decode decodes a run's structured answer (Result.Output) into a T.
// A run that did not end with a final answer returns its error
// (Result.Err, a *StopError); one without an output schema, ErrNoOutput.
func Decode[T any](r *Result) (T, error) {
	var v T
	if err := r.Err(); err != nil {
		return v, err
	}
	if r.Output == nil {
		return v, ErrNoOutput
	}
	if err := json.Unmarshal(r.Output, &v); err != nil {
		return v, fmt.Errorf("loop: decoding the answer of run %s into %T: %w", r.RunID, v, err)
	}
	return v, nil
}

// output is the run's structured answer (Result.Output): nil unless the
// run has an output schema and ended with a final answer.
func (s *State) output() json.RawMessage {
	if s.Output == nil || s.Status != FinalAnswer || len(s.Messages) == 0 {
		return nil
	}
	return OutputJSON(s.Messages[len(s.Messages)-1].Text)
}
