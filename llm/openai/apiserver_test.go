package openai_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// apiServer is a Responses API server that checks a request's input items
// the way OpenAI does for a stateless request (store=false), and answers
// with its error bodies, word for word, when they are wrong:
//
//   - a reasoning item must have a summary, even an empty one (400);
//   - a reasoning item without encrypted content is looked up by ID, which
//     fails: the server keeps nothing (404);
//   - a reasoning item whose encrypted content is not what the server
//     issued for that ID fails verification (400 invalid_encrypted_content);
//   - a reasoning item must be followed at once by an item it produced
//     (400);
//   - a function call or message that carries the item ID of one the
//     server produced after a reasoning item must come after that
//     reasoning item (400); an item ID the server never issued is not
//     found (404).
//
// It answers the i-th request with the i-th reply of testdata/responses
// (the last one repeats), and learns the items of each reply it serves.
// Reasoning items carry their encrypted content only when the request
// asked for it (include reasoning.encrypted_content).
type apiServer struct {
	*httptest.Server
	replies [][]byte

	mu       sync.Mutex
	requests [][]byte
	// issued are the items served, by ID.
	issued map[string]issuedItem
}

// issuedItem is an output item the server produced.
type issuedItem struct {
	typ string
	// encrypted is a reasoning item's encrypted content.
	encrypted string
	// reasoning is, for any other item, the reasoning item that came
	// before it in its reply ("" when none did).
	reasoning string
}

func newAPIServer(t *testing.T, files ...string) *apiServer {
	t.Helper()
	var bodies [][]byte
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("testdata", "responses", f))
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, b)
	}
	return newAPIServerWith(t, bodies...)
}

// newAPIServerWith is newAPIServer with the reply bodies given.
func newAPIServerWith(t *testing.T, bodies ...[]byte) *apiServer {
	t.Helper()
	s := &apiServer{issued: map[string]issuedItem{}, replies: bodies}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// client builds an SDK client for the server, as the package documentation
// asks.
func (s *apiServer) client() sdk.Client {
	return sdk.NewClient(
		option.WithBaseURL(s.URL),
		option.WithHTTPClient(s.Client()),
		option.WithAPIKey("sk-test"),
		option.WithMaxRetries(0),
	)
}

func (s *apiServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

func (s *apiServer) request(i int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[i]
}

// wireItem is the part of an input item the checks read.
type wireItem struct {
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	Role             string          `json:"role"`
	EncryptedContent *string         `json:"encrypted_content"`
	Summary          json.RawMessage `json:"summary"`
}

type wireRequest struct {
	Store   *bool      `json:"store"`
	Include []string   `json:"include"`
	Input   []wireItem `json:"input"`
}

func (s *apiServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.requests)
	s.requests = append(s.requests, body)
	w.Header().Set("Content-Type", "application/json")
	var req wireRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeAPIError(w, http.StatusBadRequest, "We could not parse the JSON body of your request.", "", "")
		return
	}
	if req.Store == nil || *req.Store {
		// Not a stateless request: this server only plays store=false.
		writeAPIError(w, http.StatusBadRequest, "test server: store must be false", "store", "")
		return
	}
	if status, msg, param, code := s.check(req.Input); status != 0 {
		writeAPIError(w, status, msg, param, code)
		return
	}
	reply := s.replies[min(n, len(s.replies)-1)]
	out, err := s.learn(reply, slices.Contains(req.Include, "reasoning.encrypted_content"))
	if err != nil {
		writeAPIError(w, http.StatusInternalServerError, err.Error(), "", "server_error")
		return
	}
	w.Write(out)
}

// check applies the API's rules to the input items: 0 when they hold,
// else the status and error the API answers with.
func (s *apiServer) check(input []wireItem) (status int, msg, param, code string) {
	seen := map[string]bool{}
	for i, it := range input {
		if it.Type == "reasoning" {
			if it.Summary == nil {
				return http.StatusBadRequest, fmt.Sprintf("Missing required parameter: 'input[%d].summary'.", i), fmt.Sprintf("input[%d].summary", i), "missing_required_parameter"
			}
			if it.EncryptedContent == nil {
				return http.StatusNotFound, fmt.Sprintf("Item with id '%s' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.", it.ID), "input", ""
			}
			iss, ok := s.issued[it.ID]
			if !ok || iss.typ != "reasoning" || iss.encrypted != *it.EncryptedContent {
				return http.StatusBadRequest, fmt.Sprintf("The encrypted content for item %s could not be verified. Reason: Encrypted content could not be decrypted or parsed.", it.ID), "", "invalid_encrypted_content"
			}
			if i+1 == len(input) || input[i+1].ID == "" || s.issued[input[i+1].ID].reasoning != it.ID {
				return http.StatusBadRequest, fmt.Sprintf("Item '%s' of type 'reasoning' was provided without its required following item.", it.ID), "input", ""
			}
			seen[it.ID] = true
			continue
		}
		if it.ID == "" {
			continue
		}
		iss, ok := s.issued[it.ID]
		if !ok {
			return http.StatusNotFound, fmt.Sprintf("Item with id '%s' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.", it.ID), "input", ""
		}
		if iss.reasoning != "" && !seen[iss.reasoning] {
			return http.StatusBadRequest, fmt.Sprintf("Item '%s' of type '%s' was provided without its required 'reasoning' item: '%s'.", it.ID, iss.typ, iss.reasoning), "input", ""
		}
	}
	return 0, "", "", ""
}

// learn records the items of a reply about to be served and returns its
// body: as it is, or without encrypted content when it was not asked for.
func (s *apiServer) learn(reply []byte, encrypted bool) ([]byte, error) {
	var resp map[string]any
	if err := json.Unmarshal(reply, &resp); err != nil {
		return nil, err
	}
	items, _ := resp["output"].([]any)
	reasoning := ""
	for _, v := range items {
		item := v.(map[string]any)
		id, _ := item["id"].(string)
		typ, _ := item["type"].(string)
		if typ == "reasoning" {
			enc, _ := item["encrypted_content"].(string)
			s.issued[id] = issuedItem{typ: typ, encrypted: enc}
			reasoning = id
			if !encrypted {
				delete(item, "encrypted_content")
			}
			continue
		}
		s.issued[id] = issuedItem{typ: typ, reasoning: reasoning}
	}
	if encrypted {
		return reply, nil
	}
	return json.Marshal(resp)
}

func writeAPIError(w http.ResponseWriter, status int, msg, param, code string) {
	nullable := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	enc.Encode(map[string]any{"error": map[string]any{
		"message": msg, "type": "invalid_request_error", "param": nullable(param), "code": nullable(code),
	}})
	w.WriteHeader(status)
	w.Write(b.Bytes())
}
