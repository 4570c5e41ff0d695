package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/llmtest"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

func runWeather(t *testing.T, m llm.Model, stream bool) *loop.Result {
	t.Helper()
	tools, err := tool.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	res, _ := loop.Run(context.Background(), loop.Config{
		Model: m, ModelName: "claude-sonnet-4-6", Tools: tools, Stream: stream,
		OutputSchema: json.RawMessage(llmtest.WeatherSchema), OutputName: "weather",
	}, []llm.Message{llm.UserMessage("Weather in Oslo, as JSON?")})
	if res == nil {
		t.Fatal("no result")
	}
	return res
}

// outputFormat returns output_config.format of a request body.
func outputFormat(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var req struct {
		OutputConfig struct {
			Format map[string]any `json:"format"`
		} `json:"output_config"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	return req.OutputConfig.Format
}

// A run with an output schema through the real SDK, whole and streamed:
// each request carries the schema as structured outputs
// (output_config.format {type: json_schema, schema}), and the conforming
// answer decodes into a struct.
func TestOutputSchemaRun(t *testing.T) {
	var want map[string]any
	_ = json.Unmarshal([]byte(llmtest.WeatherSchema), &want)
	check := func(t *testing.T, res *loop.Result, body []byte) {
		t.Helper()
		w, err := loop.Decode[llmtest.Weather](res)
		if err != nil || w != (llmtest.Weather{City: "Oslo", TempC: 12}) {
			t.Fatalf("Decode = %+v, %v (%s: %s)", w, err, res.Status, res.Detail)
		}
		if f := outputFormat(t, body); f["type"] != "json_schema" || !reflect.DeepEqual(f["schema"], want) {
			t.Errorf("output_config.format = %v, want json_schema with the schema", f)
		}
	}
	t.Run("generate", func(t *testing.T) {
		s := newServer(t, ok("weather_json.json"))
		res := runWeather(t, New(s.client(), nil), false)
		check(t, res, s.last())
	})
	t.Run("stream", func(t *testing.T) {
		s := newSSEServer(t, readFixture(t, "stream_weather_json.sse"), 7, 0)
		res := runWeather(t, New(s.client(), nil), true)
		check(t, res, s.requests()[0])
	})
	t.Run("NoOutputFormat", func(t *testing.T) {
		s := newServer(t, ok("weather_json.json"))
		res := runWeather(t, New(s.client(), &Options{NoOutputFormat: true}), false)
		if _, err := loop.Decode[llmtest.Weather](res); err != nil {
			t.Fatal(err)
		}
		if f := outputFormat(t, s.last()); f != nil {
			t.Errorf("output_config.format = %v, want none", f)
		}
	})
}

// A prose answer and one missing a field go back with what was wrong
// before one conforms; a model that never conforms stops the run with
// invalid_output after the two corrections.
func TestOutputSchemaRetries(t *testing.T) {
	t.Run("corrected", func(t *testing.T) {
		s := newServer(t, ok("final_answer.json"), ok("weather_json_missing.json"), ok("weather_json.json"))
		res := runWeather(t, New(s.client(), nil), false)
		if w, err := loop.Decode[llmtest.Weather](res); err != nil || w.TempC != 12 || res.Steps != 3 {
			t.Fatalf("Decode = %+v, %v after %d steps (%s: %s)", w, err, res.Steps, res.Status, res.Detail)
		}
		reqs := s.requests()
		if !strings.Contains(string(reqs[2]), `missing required field \"temp_c\"`) {
			t.Errorf("third request does not name the missing field: %s", reqs[2])
		}
	})
	t.Run("never", func(t *testing.T) {
		s := newServer(t, ok("final_answer.json"), ok("weather_json_missing.json"))
		res := runWeather(t, New(s.client(), nil), false)
		if res.Status != loop.InvalidOutput || len(s.requests()) != 3 {
			t.Fatalf("status %s after %d requests (%s)", res.Status, len(s.requests()), res.Detail)
		}
		if _, err := loop.Decode[llmtest.Weather](res); !errors.Is(err, loop.InvalidOutput) {
			t.Errorf("Decode error = %v, want invalid_output", err)
		}
	})
}
