package llmhttptest_test

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/toolloop/toolloop/llm/llmhttp/llmhttptest"
)

func TestFloodServerSendsJSON(t *testing.T) {
	f := llmhttptest.NewFloodServer(t, 100<<10+7)
	resp, err := f.Client().Get(f.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(b) != 100<<10+7 || !json.Valid(b) || f.Written() != int64(len(b)) {
		t.Fatalf("read %d bytes (valid JSON: %v), err %v", len(b), json.Valid(b), err)
	}
}
