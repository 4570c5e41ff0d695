package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	sjs "github.com/santhosh-tekuri/jsonschema/v6"
)

// OutputSchema is a compiled JSON Schema for a run's final answer (see
// loop.Config.OutputSchema). It is compiled and checked as tools' input
// schemas are: draft 2020-12 unless $schema says otherwise, references
// only inside the schema and to the meta-schemas, violations reported
// with the path of the value at fault.
type OutputSchema struct {
	schema *sjs.Schema
}

// outputNouns word the violations of an answer.
var outputNouns = nouns{"field", "the answer"}

// CompileOutputSchema compiles raw, which must be a JSON Schema that is a
// JSON object (every provider's structured output wants one).
func CompileOutputSchema(raw []byte) (*OutputSchema, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errors.New("output schema is empty")
	}
	doc, err := sjs.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("output schema is not JSON: %s", clipMessage(err.Error()))
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, fmt.Errorf("output schema must be a JSON object, got %.40s", raw)
	}
	s, err := compileSchemaDoc(doc)
	if err != nil {
		return nil, fmt.Errorf("output schema is not a valid JSON Schema: %s", clipMessage(err.Error()))
	}
	return &OutputSchema{schema: s}, nil
}

// Check returns nil when answer is one JSON value, within l, that
// matches the schema, and otherwise an error whose text says what is
// wrong in words a model can act on: the limit passed, where the JSON
// breaks, a key given twice, or up to four violations with their paths
// ("field \"items/2/qty\": ..."), about a kilobyte at most.
func (o *OutputSchema) Check(answer []byte, l Limits) error {
	if l.MaxBytes > 0 && len(answer) > l.MaxBytes {
		return fmt.Errorf("the answer is %d bytes, more than the limit of %d bytes", len(answer), l.MaxBytes)
	}
	if l.MaxDepth > 0 && nesting(answer, l.MaxDepth) > l.MaxDepth {
		return fmt.Errorf("the answer nests more than %d levels deep, the limit", l.MaxDepth)
	}
	var v any
	if err := json.Unmarshal(answer, &v); err != nil {
		msg := err.Error()
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) && syntax.Offset > 0 && !strings.HasPrefix(msg, "unexpected end") {
			msg += fmt.Sprintf(" at offset %d", syntax.Offset-1)
		}
		return errors.New("the answer is not JSON: " + clipMessage(msg))
	}
	if memberCount(answer) != decodedMembers(v) {
		return errors.New("the answer gives the key " + quoteClipped(duplicatePath(answer)) + " twice")
	}
	if err := o.schema.Validate(v); err != nil {
		return errors.New("the answer does not match the schema: " + describeViolationOf(err, outputNouns))
	}
	return nil
}
