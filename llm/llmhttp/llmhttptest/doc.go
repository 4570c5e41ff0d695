// Package llmhttptest is llmhttp's test kit: FloodServer, an HTTP server
// whose replies are as long as a test asks for, against which each
// provider adapter checks that its response cap (llmhttp.ResponseGuard)
// stops reading a runaway reply soon after the cap.
//
// It is apart from llm/llmtest, whose scripted model the sandbox and the
// loop's tests use, because it needs net/http/httptest: importing
// llmtest must not compile net/http (see package llmhttp).
package llmhttptest
