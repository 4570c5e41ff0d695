package llmtest

// WeatherSchema is the output schema the adapters' structured-answer
// tests share: a city and a temperature, both required, nothing else.
const WeatherSchema = `{"type":"object","properties":{"city":{"type":"string"},"temp_c":{"type":"number"}},` +
	`"required":["city","temp_c"],"additionalProperties":false}`

// Weather is an answer that matches WeatherSchema, decoded.
type Weather struct {
	City  string  `json:"city"`
	TempC float64 `json:"temp_c"`
}
