package gemini_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"

	"google.golang.org/genai"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/llm/gemini"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/tool"
)

// A loop run on Gemini. A local server plays the Gemini API here; against
// the real one, leave BaseURL and HTTPClient out and pass the key from the
// application's configuration.
func Example() {
	api := fakeGemini("parallel_calls.json", "final_answer.json")
	defer api.Close()

	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:      "test", // e.g. os.Getenv("GEMINI_API_KEY"), read by the command line
		Backend:     genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: api.URL},
		HTTPClient:  api.Client(),
	})
	if err != nil {
		panic(err)
	}
	temperature := float32(0.2)
	model := gemini.New(client, &gemini.Options{
		Model:           "gemini-2.5-flash",
		MaxOutputTokens: 1024,
		Temperature:     &temperature,
	})

	type cityIn struct {
		City string `json:"city"`
	}
	type zoneIn struct {
		Zone string `json:"zone"`
	}
	weather := tool.MustNew(tool.Spec[cityIn]{Name: "get_weather", Description: "current weather in a city"},
		func(ctx context.Context, in cityIn) (map[string]int, error) { return map[string]int{"temp_c": 12}, nil })
	clock := tool.MustNew(tool.Spec[zoneIn]{Name: "get_time", Description: "local time in a time zone"},
		func(ctx context.Context, in zoneIn) (string, error) { return "14:05", nil })
	tools, err := tool.NewRegistry(weather, clock)
	if err != nil {
		panic(err)
	}

	res, err := loop.Run(context.Background(), loop.Config{Model: model, Tools: tools},
		[]llm.Message{llm.UserMessage("Weather and time in Oslo?")})
	if err != nil {
		fmt.Println("stopped:", err)
		return
	}
	fmt.Println(res.Status, res.Steps, res.ToolCalls)
	fmt.Println(res.Answer())
	// Output:
	// final_answer 2 2
	// It is 12 °C in Oslo.
}

// fakeGemini answers generateContent with the testdata replies in order.
func fakeGemini(files ...string) *httptest.Server {
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := min(int(n.Add(1))-1, len(files)-1)
		body, err := os.ReadFile(filepath.Join("testdata", files[i]))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
}
