package gemini_test

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
)

// generationConfig is the part of a request body that says how to answer.
type generationConfig struct {
	GenerationConfig struct {
		ResponseMIMEType   string         `json:"responseMimeType"`
		ResponseJSONSchema map[string]any `json:"responseJsonSchema"`
	} `json:"generationConfig"`
}

func runWeather(t *testing.T, s *server, model string) *loop.Result {
	t.Helper()
	res, _ := loop.Run(context.Background(), loop.Config{
		Model: s.model(t, nil), ModelName: model, Tools: weatherTools(t),
		OutputSchema: json.RawMessage(llmtest.WeatherSchema), OutputName: "weather",
	}, []llm.Message{llm.UserMessage("Weather in Oslo, as JSON?")})
	if res == nil {
		t.Fatal("no result")
	}
	return res
}

// A run with an output schema through the real SDK: Gemini 3 is asked
// for JSON by its schema (responseMimeType, responseJsonSchema), tools
// and all, and the conforming answer decodes into a struct.
func TestOutputSchemaRun(t *testing.T) {
	s := newServer(t, ok("weather_json.json"))
	res := runWeather(t, s, "gemini-3-flash-preview")
	w, err := loop.Decode[llmtest.Weather](res)
	if err != nil || w != (llmtest.Weather{City: "Oslo", TempC: 12}) {
		t.Fatalf("Decode = %+v, %v (%s: %s)", w, err, res.Status, res.Detail)
	}
	var req generationConfig
	if err := json.Unmarshal(s.last(), &req); err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	_ = json.Unmarshal([]byte(llmtest.WeatherSchema), &want)
	if g := req.GenerationConfig; g.ResponseMIMEType != "application/json" || !reflect.DeepEqual(g.ResponseJSONSchema, want) {
		t.Errorf("generationConfig = %+v, want application/json with the schema", g)
	}
}

// Gemini 2.x refuses function calling with a JSON response type: a run
// with tools sends no schema, and the loop's validation alone corrects a
// prose answer and one missing a field before one conforms.
func TestOutputSchemaCorrected(t *testing.T) {
	s := newServer(t, ok("final_answer.json"), ok("weather_json_missing.json"), ok("weather_json.json"))
	res := runWeather(t, s, "gemini-2.5-flash")
	w, err := loop.Decode[llmtest.Weather](res)
	if err != nil || w.TempC != 12 || res.Steps != 3 {
		t.Fatalf("Decode = %+v, %v after %d steps (%s: %s)", w, err, res.Steps, res.Status, res.Detail)
	}
	bodies, _ := s.requests()
	for i, b := range bodies {
		var req generationConfig
		if err := json.Unmarshal(b, &req); err != nil {
			t.Fatal(err)
		}
		if g := req.GenerationConfig; g.ResponseMIMEType != "" || g.ResponseJSONSchema != nil {
			t.Errorf("request %d asks Gemini 2.5 with tools for JSON: %+v", i+1, g)
		}
	}
	if !strings.Contains(string(bodies[2]), `missing required field \"temp_c\"`) {
		t.Errorf("third request does not name the missing field: %s", bodies[2])
	}
}

// A model that never conforms stops the run with invalid_output after
// the two corrections: three requests.
func TestOutputSchemaNever(t *testing.T) {
	s := newServer(t, ok("final_answer.json"), ok("weather_json_missing.json"))
	res := runWeather(t, s, "gemini-3-flash-preview")
	bodies, _ := s.requests()
	if res.Status != loop.InvalidOutput || len(bodies) != 3 {
		t.Fatalf("status %s after %d requests (%s)", res.Status, len(bodies), res.Detail)
	}
	if _, err := loop.Decode[llmtest.Weather](res); !errors.Is(err, loop.InvalidOutput) {
		t.Errorf("Decode error = %v, want invalid_output", err)
	}
}
