package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/toolloop/toolloop/console"
	"github.com/toolloop/toolloop/console/consoletest"
	"github.com/toolloop/toolloop/store"
)

// A console over a memory store, with one person, approving a paused run
// through the JSON API: the answer is recorded under dana's name and the
// console resumes the run.
func ExampleNew() {
	ctx := context.Background()
	mem := store.NewMemory()
	run, err := consoletest.Scenario(ctx, mem, "confirmation_required") // paused on call_r1
	if err != nil {
		panic(err)
	}
	users, err := console.ParseUsers(strings.NewReader("dana dana-token-0123456789\n"))
	if err != nil {
		panic(err)
	}
	srv, err := console.New(console.Options{Backend: consoletest.Backend(mem), Users: users})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()

	req, _ := http.NewRequest("POST", ts.URL+"/api/runs/"+run+"/calls/call_r1/approve", strings.NewReader(`{"note": "checked the photos"}`))
	req.Header.Set("Authorization", "Bearer dana-token-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var d console.Decision
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		panic(err)
	}
	fmt.Println(resp.StatusCode, d.By, d.Resume, d.Status)
	// Output: 200 dana resumed final_answer
}
