// Package llmhttp is what provider adapters share about HTTP: HTTPError
// classifies a provider's failed reply (status, Retry-After, body) as an
// *llm.Error, and ResponseGuard checks each reply before an SDK reads it,
// capping its size (DefaultMaxResponseBytes, DefaultMaxStreamBytes) and
// refusing a successful reply that is not JSON, or an event stream the
// request did not ask for (ExpectStream), as llm.KindBadResponse.
//
// It is a package of its own so that package llm, which the loop and
// everything else import, stays free of net/http: a program that never
// speaks HTTP to a model, such as the sandbox (go run ./cmd/sandbox) or a
// test with a scripted model, then compiles neither net/http nor
// crypto/tls. Only the adapters (llm/openai, llm/anthropic, llm/gemini)
// import it. Its test kit, a server whose replies are as long as a test
// asks for, is llm/llmhttp/llmhttptest.
package llmhttp
