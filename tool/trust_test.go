package tool_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/tool"
)

type payIn struct {
	Recipient string `json:"recipient"`
	Amount    int    `json:"amount"`
	Notify    struct {
		Email string `json:"email" jsonschema:"where to send the receipt"`
	} `json:"notify"`
}

func TestTrustFieldUntrusted(t *testing.T) {
	tr := tool.Trust{UntrustedFields: []string{"transactions.subject", "note"}, TrustedFields: []string{"note.id"}}
	for path, want := range map[string]bool{
		"": false, "transactions": false, "transactions.subject": true, "transactions.subjects": false,
		"transactions.subject.x": true, "note": true, "note.id": false, "note.id.x": false, "note.text": true,
	} {
		if got := tr.FieldUntrusted(path); got != want {
			t.Errorf("FieldUntrusted(%q) = %v, want %v", path, got, want)
		}
	}
	tr = tool.Trust{Untrusted: true, TrustedFields: []string{"id"}}
	if tr.FieldUntrusted("id") || !tr.FieldUntrusted("body") || !tr.FieldUntrusted("") {
		t.Errorf("an untrusted tool vouching for id: id %v, body %v, whole %v", tr.FieldUntrusted("id"), tr.FieldUntrusted("body"), tr.FieldUntrusted(""))
	}
}

func TestTrustDestinationsFromSchemaAndDeclared(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{
		"to":{"type":"string","format":"email"},
		"page":{"type":"object","properties":{"url":{"type":"string","format":"uri"}}},
		"cc":{"type":"array","items":{"type":"string","format":"idn-email"}},
		"iban":{"type":"string"},"body":{"type":"string"}}}`)
	tt, err := tool.NewRaw(tool.Definition{Name: "send", InputSchema: schema, Effect: tool.Write,
		Trust: tool.Trust{Outward: true, Destinations: []string{"iban"}}},
		func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := tt.Destinations()
	slices.Sort(got)
	if want := []string{"cc", "iban", "page.url", "to"}; !slices.Equal(got, want) {
		t.Errorf("Destinations = %q, want %q", got, want)
	}
	if tr := tt.Trust(); !tr.Outward || tr.Untrusted || len(tr.Destinations) != 4 {
		t.Errorf("Trust = %+v", tr)
	}
	// Changing what Trust returned changes nothing in the tool.
	tr := tt.Trust()
	tr.Destinations[0] = "x"
	if tt.Destinations()[0] == "x" {
		t.Error("Trust shares its Destinations with the tool")
	}
}

func TestTrustDestinationMustBeAnArgument(t *testing.T) {
	_, err := tool.New(tool.Spec[payIn]{Name: "pay", Effect: tool.Write, Trust: tool.Trust{Destinations: []string{"recipent"}}},
		func(context.Context, payIn) (string, error) { return "", nil })
	if err == nil || !strings.Contains(err.Error(), `"recipent"`) || !strings.Contains(err.Error(), `tool "pay"`) {
		t.Fatalf("a misspelt destination: err = %v, want one naming the tool and the field", err)
	}
	tt, err := tool.New(tool.Spec[payIn]{Name: "pay", Effect: tool.Write,
		Trust: tool.Trust{Outward: true, Credentials: true, ReadsPrivate: true, Destinations: []string{"recipient", "notify.email"}}},
		func(context.Context, payIn) (string, error) { return "", nil })
	if err != nil {
		t.Fatal(err)
	}
	if d := tt.Definition().Trust; !d.Outward || !d.Credentials || !d.ReadsPrivate || len(d.Destinations) != 2 {
		t.Errorf("the Spec's Trust did not reach the definition: %+v", d)
	}
}

func TestAnnotationsOpenWorldIsOutward(t *testing.T) {
	f, tr := false, true
	for _, c := range []struct {
		hint *bool
		want bool
	}{{nil, true}, {&tr, true}, {&f, false}} {
		var def tool.Definition
		tool.Annotations{ReadOnlyHint: &tr, OpenWorldHint: c.hint}.ApplyTo(&def)
		if def.Trust.Outward != c.want {
			t.Errorf("openWorldHint %v: Outward = %v, want %v", c.hint, def.Trust.Outward, c.want)
		}
	}
}
