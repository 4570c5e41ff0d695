package openai

import (
	"encoding/json"
	"fmt"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/toolloop/toolloop/llm"
)

// outputSchema returns the members of an output schema (llm.Request.Output)
// as the SDK's schema map, each member's JSON kept as sent.
func outputSchema(o *llm.OutputFormat) (map[string]any, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(o.Schema, &fields); err != nil {
		return nil, badRequest(fmt.Errorf("openai: output schema %q is not a JSON object: %w", o.Name, err))
	}
	m := make(map[string]any, len(fields))
	for k, v := range fields {
		m[k] = v
	}
	return m, nil
}

// chatResponseFormat is Chat Completions' structured output for o:
// response_format {type: json_schema, json_schema: {name, schema, strict}}.
func chatResponseFormat(o *llm.OutputFormat) (sdk.ChatCompletionNewParamsResponseFormatUnion, error) {
	schema, err := outputSchema(o)
	if err != nil {
		return sdk.ChatCompletionNewParamsResponseFormatUnion{}, err
	}
	js := shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: o.Name, Schema: schema}
	if o.Strict {
		js.Strict = param.NewOpt(true)
	}
	return sdk.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{JSONSchema: js}}, nil
}

// responsesTextFormat is the Responses API's structured output for o:
// text.format {type: json_schema, name, schema, strict}.
func responsesTextFormat(o *llm.OutputFormat) (responses.ResponseTextConfigParam, error) {
	schema, err := outputSchema(o)
	if err != nil {
		return responses.ResponseTextConfigParam{}, err
	}
	js := &responses.ResponseFormatTextJSONSchemaConfigParam{Name: o.Name, Schema: schema}
	if o.Strict {
		js.Strict = param.NewOpt(true)
	}
	return responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{OfJSONSchema: js}}, nil
}
