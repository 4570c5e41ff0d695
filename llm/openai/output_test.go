package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/llm/openai"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

// A run with an output schema through the real SDK, on both APIs: each
// request asks for the schema the API's way, a conforming answer decodes
// into a struct, a prose answer and one missing a field go back with what
// was wrong before one conforms, and a model that never conforms stops the
// run with invalid_output.
func TestOutputSchemaRun(t *testing.T) {
	for _, api := range []struct {
		name   string
		model  func(s *server) llm.Model
		format func(t *testing.T, body []byte) map[string]any
	}{
		{"chat", func(s *server) llm.Model { return openai.NewChat(s.client(), nil) }, chatFormat},
		{"responses", func(s *server) llm.Model { return openai.NewResponses(s.client(), nil) }, responsesFormat},
	} {
		run := func(t *testing.T, s *server) *loop.Result {
			t.Helper()
			res, _ := loop.Run(context.Background(), loop.Config{
				Model: api.model(s), ModelName: "gpt-test", Tools: emptyRegistry(t),
				OutputSchema: json.RawMessage(llmtest.WeatherSchema), OutputName: "weather", OutputStrict: true,
			}, []llm.Message{llm.UserMessage("Weather in Oslo, as JSON?")})
			if res == nil {
				t.Fatal("no result")
			}
			return res
		}
		t.Run(api.name+"/conforms", func(t *testing.T) {
			s := newServer(t, api.name, ok("weather_json.json"))
			res := run(t, s)
			w, err := loop.Decode[llmtest.Weather](res)
			if err != nil || w != (llmtest.Weather{City: "Oslo", TempC: 12}) {
				t.Fatalf("Decode = %+v, %v (%s: %s)", w, err, res.Status, res.Detail)
			}
			f := api.format(t, s.request(0))
			if f["type"] != "json_schema" || f["name"] != "weather" || f["strict"] != true {
				t.Errorf("request format = %v, want json_schema named weather, strict", f)
			}
			var want any
			_ = json.Unmarshal([]byte(llmtest.WeatherSchema), &want)
			if !reflect.DeepEqual(f["schema"], want) {
				t.Errorf("request schema = %v, want %s", f["schema"], llmtest.WeatherSchema)
			}
		})
		t.Run(api.name+"/corrected", func(t *testing.T) {
			s := newServer(t, api.name, ok("final_answer.json"), ok("weather_json_missing.json"), ok("weather_json.json"))
			res := run(t, s)
			w, err := loop.Decode[llmtest.Weather](res)
			if err != nil || w.City != "Oslo" || res.Steps != 3 {
				t.Fatalf("Decode = %+v, %v after %d steps (%s: %s)", w, err, res.Steps, res.Status, res.Detail)
			}
			if second := string(s.request(1)); !strings.Contains(second, "Your answer was refused: the answer is not JSON") {
				t.Errorf("second request does not say the answer was not JSON: %s", second)
			}
			if third := string(s.request(2)); !strings.Contains(third, `missing required field \"temp_c\"`) {
				t.Errorf("third request does not name the missing field: %s", third)
			}
			if err := llm.CheckHistory(res.Messages); err != nil {
				t.Error(err)
			}
		})
		t.Run(api.name+"/never", func(t *testing.T) {
			s := newServer(t, api.name, ok("final_answer.json"), ok("weather_json_missing.json"))
			res := run(t, s)
			if res.Status != loop.InvalidOutput || s.count() != 3 || res.Output != nil {
				t.Fatalf("status %s after %d requests, output %s; want invalid_output after 3 (%s)", res.Status, s.count(), res.Output, res.Detail)
			}
			if _, err := loop.Decode[llmtest.Weather](res); !errors.Is(err, loop.InvalidOutput) {
				t.Errorf("Decode error = %v, want invalid_output", err)
			}
			if !strings.Contains(res.Detail, `missing required field "temp_c"`) {
				t.Errorf("detail %q does not name the missing field", res.Detail)
			}
		})
	}
}

// chatFormat returns response_format.json_schema of a Chat request, with
// response_format.type as "type".
func chatFormat(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var req struct {
		ResponseFormat struct {
			Type       string         `json:"type"`
			JSONSchema map[string]any `json:"json_schema"`
		} `json:"response_format"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	f := req.ResponseFormat.JSONSchema
	if f == nil {
		t.Fatalf("request has no response_format.json_schema: %s", body)
	}
	f["type"] = req.ResponseFormat.Type
	return f
}

// responsesFormat returns text.format of a Responses request.
func responsesFormat(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var req struct {
		Text struct {
			Format map[string]any `json:"format"`
		} `json:"text"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	if req.Text.Format == nil {
		t.Fatalf("request has no text.format: %s", body)
	}
	return req.Text.Format
}

func emptyRegistry(t *testing.T) *tool.Registry {
	t.Helper()
	reg, err := tool.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	return reg
}
