package temporal

import (
	"fmt"

	"github.com/toolloop/toolloop/loop"
)

// outputSpec is the run's output schema as its started event records it
// (loop.NewOutputSpec, as the in-process runner builds it), or nil for a
// run without one. It is deterministic: the schema is compiled, nothing
// is loaded.
func (in *RunInput) outputSpec() (*loop.OutputSpec, error) {
	if len(in.OutputSchema) == 0 {
		return nil, nil
	}
	o, err := loop.NewOutputSpec(in.OutputSchema, in.OutputName, in.OutputStrict, in.OutputRetries)
	if err != nil {
		return nil, fmt.Errorf("temporal: RunInput.OutputSchema: %w", err)
	}
	return o, nil
}
