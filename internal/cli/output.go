package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/toolloop/toolloop/loop"
)

// maxSchemaFileBytes bounds --output-schema's file: a schema is a few
// kilobytes, and every model request carries it.
const maxSchemaFileBytes = 1 << 20

// readOutputSchema reads and checks --output-schema FILE: a regular file
// of at most maxSchemaFileBytes holding a JSON Schema object that the
// validator compiles, so that a bad schema is a usage error naming the
// file before anything runs. retries is --output-retries, checked too.
func readOutputSchema(path string, retries int) (json.RawMessage, error) {
	if path == "" {
		if retries != 0 {
			return nil, &usageErr{"--output-retries needs --output-schema FILE"}
		}
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &usageErr{fmt.Sprintf("--output-schema: %v", err)}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &usageErr{fmt.Sprintf("--output-schema: %v", err)}
	}
	if !st.Mode().IsRegular() {
		return nil, &usageErr{fmt.Sprintf("--output-schema %s: not a regular file (%s); want a JSON Schema file", path, fileKind(st.Mode()))}
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSchemaFileBytes+1))
	if err != nil {
		return nil, &usageErr{fmt.Sprintf("--output-schema: %v", err)}
	}
	if len(data) > maxSchemaFileBytes {
		return nil, &usageErr{fmt.Sprintf("--output-schema %s: more than the %d bytes a schema file may have", path, maxSchemaFileBytes)}
	}
	if _, err := loop.NewOutputSpec(data, "", false, retries); err != nil {
		return nil, &usageErr{fmt.Sprintf("--output-schema %s: %v", path, err)}
	}
	return data, nil
}
