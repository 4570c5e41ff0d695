package cli

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type tillOrder struct {
	OrderID string `json:"order_id"`
}

type tillRefund struct {
	RefundID string `json:"refund_id"`
}

// tillServer is an MCP server over streamable HTTP with refund, reverse
// (undoes a refund; fails when failReverse is set) and voucher (fails for
// order B); standing is the refunds that stand.
type tillServer struct {
	web         *httptest.Server
	mu          sync.Mutex
	standing    map[string]bool
	failReverse bool
}

func newTillServer(t *testing.T, failReverse bool) *tillServer {
	b := &tillServer{standing: map[string]bool{}, failReverse: failReverse}
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "till", Version: "v1"}, nil)
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "refund", Description: "refund an order"},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in tillOrder) (*mcpsdk.CallToolResult, tillRefund, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.standing["R-"+in.OrderID] = true
			return nil, tillRefund{RefundID: "R-" + in.OrderID}, nil
		})
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "reverse", Description: "reverse a refund"},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in tillRefund) (*mcpsdk.CallToolResult, tillRefund, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.failReverse {
				return nil, tillRefund{}, errors.New("the bank refuses to reverse " + in.RefundID)
			}
			delete(b.standing, in.RefundID)
			return nil, in, nil
		})
	mcpsdk.AddTool(srv, &mcpsdk.Tool{Name: "voucher", Description: "issue a voucher"},
		func(_ context.Context, _ *mcpsdk.CallToolRequest, in tillOrder) (*mcpsdk.CallToolResult, tillRefund, error) {
			return nil, tillRefund{}, errors.New("order " + in.OrderID + " has not shipped")
		})
	b.web = httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return srv }, nil))
	t.Cleanup(b.web.Close)
	return b
}

func (b *tillServer) stands(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.standing[id]
}

const tillConfig = `{"mcp1": {"tools": {"refund": {"compensation": {"tool": "reverse", "args": {"refund_id": "result.refund_id"}}}}}}`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runTill runs a model that refunds A and issues a voucher for B in one
// turn, against till, with extra flags.
func runTill(t *testing.T, till *tillServer, extra ...string) (int, string, string) {
	t.Helper()
	srv := newChatServer(t,
		chatCalls([3]string{"call_1", "mcp1_refund", `{"order_id":"A"}`}, [3]string{"call_2", "mcp1_voucher", `{"order_id":"B"}`}),
		chatText("Neither went through."))
	dir := t.TempDir()
	args := append([]string{"run", "--provider", "openai", "--base-url", srv.srv.URL + "/v1", "--model", "any",
		"--mcp-url", till.web.URL, "--db", filepath.Join(dir, "t.db"), "--log", dir}, extra...)
	return call(append(args, "Refund A and a voucher for B, both or neither.")...)
}

// TestRunCompensate: with --mcp-config giving refund its compensation,
// --compensate and --atomic-batches, the refund is reversed on the server
// when the voucher fails, and the stop line says the writes were undone,
// naming them.
func TestRunCompensate(t *testing.T) {
	till := newTillServer(t, false)
	code, out, errOut := runTill(t, till, "--mcp-config", writeFile(t, "mcp.json", tillConfig), "--compensate", "--atomic-batches")
	if code != exitOK {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if till.stands("R-A") {
		t.Errorf("the refund was not reversed")
	}
	if !regexp.MustCompile(`(?m)^toolloop: undo call call_1 by mcp1_reverse \(undo_call_1\): undone in \S+$`).MatchString(errOut) {
		t.Errorf("standard error does not show the compensation:\n%s", errOut)
	}
	stop := lines(out)[len(lines(out))-1]
	if m := runLine.FindStringSubmatch(stop); m == nil || m[1] != "final_answer" ||
		!strings.Contains(stop, ` writes="undone: undone mcp1_refund call_1; not done mcp1_voucher call_2 (failed)" run=`) {
		t.Errorf("stop line %q", stop)
	}
	// Without --compensate the refund stays, and the stop line says the
	// writes are partial.
	till = newTillServer(t, false)
	code, out, _ = runTill(t, till, "--mcp-config", writeFile(t, "mcp.json", tillConfig), "--atomic-batches")
	if stop := lines(out)[len(lines(out))-1]; code != exitOK || !till.stands("R-A") ||
		!strings.Contains(stop, ` writes="partial: done mcp1_refund call_1; not done mcp1_voucher call_2 (failed)" run=`) {
		t.Errorf("leave: exit %d, refund stands %v, stop line %q", code, till.stands("R-A"), stop)
	}
}

// TestRunCompensateWithoutGroups: --compensate with no all-or-nothing
// group anywhere warns that it will undo nothing, and the run goes on; a
// run that has a group (here --atomic-batches) is not warned.
func TestRunCompensateWithoutGroups(t *testing.T) {
	const warning = "toolloop run: warning: --compensate will undo nothing: no tool is in an all-or-nothing group"
	till := newTillServer(t, false)
	code, out, errOut := runTill(t, till, "--mcp-config", writeFile(t, "mcp.json", tillConfig), "--compensate")
	if code != exitOK || !strings.Contains(errOut, warning) {
		t.Fatalf("exit %d, stdout %q, stderr %q; want the warning", code, out, errOut)
	}
	if !till.stands("R-A") {
		t.Errorf("the refund was undone without a group")
	}
	till = newTillServer(t, false)
	if _, _, errOut = runTill(t, till, "--mcp-config", writeFile(t, "mcp.json", tillConfig), "--compensate", "--atomic-batches"); strings.Contains(errOut, warning) {
		t.Errorf("warned with --atomic-batches: %q", errOut)
	}
}

// TestRunCompensationFailed: a compensation that fails stops the run with
// compensation_failed, exit status 1, naming what is left for a person.
func TestRunCompensationFailed(t *testing.T) {
	till := newTillServer(t, true)
	code, out, errOut := runTill(t, till, "--mcp-config", writeFile(t, "mcp.json", tillConfig), "--compensate", "--atomic-batches")
	stop := lines(out)[len(lines(out))-1]
	if !strings.Contains(errOut, "toolloop: undo call call_1 by mcp1_reverse (undo_call_1): failed in ") ||
		!strings.Contains(errOut, "the bank refuses to reverse R-A") {
		t.Errorf("standard error does not show the failed compensation:\n%s", errOut)
	}
	if code != exitFail || !strings.HasPrefix(stop, "status=compensation_failed ") ||
		!strings.Contains(stop, `left for a person: mcp1_refund call_1`) || !strings.Contains(stop, `writes="partial: not done mcp1_voucher call_2 (failed); left for a person mcp1_refund call_1 (left)"`) {
		t.Errorf("exit %d, stop line %q, stderr %q", code, stop, errOut)
	}
}

// TestRunMCPConfigErrors: a bad --mcp-config is a usage error naming what
// is wrong: the file, a server past the flags, a tool the server lacks.
func TestRunMCPConfigErrors(t *testing.T) {
	till := newTillServer(t, false)
	for _, tc := range []struct {
		config string
		want   string
	}{
		{`{"mcp2": {}}`, `server "mcp2": want mcp1 to mcp1`},
		{`{"mcp1": {"tools": {"refund": {"compensate": {}}}}}`, `unknown field "compensate"`},
		{`[]`, "--mcp-config"},
		{`{"mcp1": {"tools": {"refnud": {"atomic_group": "g"}}}}`, `tool "refnud": configuration: the server offers no tool of that name`},
		{`{"mcp1": {"tools": {"refund": {"compensation": {"tool": "unrefund"}}}}}`, `its compensation names tool "unrefund", which the server does not offer`},
	} {
		code, out, errOut := runTill(t, till, "--mcp-config", writeFile(t, "mcp.json", tc.config))
		if code != exitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %q", tc.config, code, out, errOut, tc.want)
		}
	}
	srv := newChatServer(t)
	code, _, errOut := call("run", "--provider", "openai", "--base-url", srv.srv.URL+"/v1", "--model", "any",
		"--mcp-config", writeFile(t, "mcp.json", tillConfig), "--db", filepath.Join(t.TempDir(), "t.db"), "q")
	if code != exitUsage || !strings.Contains(errOut, "--mcp-config configures the tools of the --mcp and --mcp-url servers") {
		t.Errorf("without a server: exit %d, stderr %q", code, errOut)
	}
}

// TestRunCompensateResumed: --mcp-config is among the flags a run records
// for resume, so a run paused before its writes and resumed undoes the
// refund with the compensation the file declares.
func TestRunCompensateResumed(t *testing.T) {
	till := newTillServer(t, false)
	config := writeFile(t, "mcp.json", tillConfig)
	code, out, errOut := runTill(t, till, "--mcp-config", config, "--compensate", "--atomic-batches", "--confirm-writes")
	m := runLine.FindStringSubmatch(lines(out)[0])
	if code != exitOK || m == nil || m[1] != "confirmation_required" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	var resume []string
	for _, l := range lines(out) {
		if strings.HasPrefix(l, "toolloop approve ") {
			args := strings.Fields(strings.Replace(l, "NAME", "dana", 1))[1:]
			if code, _, errOut := call(args...); code != exitOK {
				t.Fatalf("%s: exit %d %s", l, code, errOut)
			}
		}
		if strings.HasPrefix(l, "toolloop resume ") {
			resume = strings.Fields(l)[1:]
		}
	}
	if !strings.Contains(strings.Join(resume, " "), "--mcp-config "+config) {
		t.Fatalf("the resume command %q lacks --mcp-config", resume)
	}
	code, out, errOut = call(resume...)
	stop := lines(out)[len(lines(out))-1]
	if code != exitOK || till.stands("R-A") || !strings.Contains(stop, `writes="undone: undone mcp1_refund call_1;`) {
		t.Errorf("resume: exit %d, refund stands %v, stop line %q, stderr %q", code, till.stands("R-A"), stop, errOut)
	}
}

// TestRunMCPConfigTrust: the model refunds A, then reverses the refund by
// the id the refund's result gave. With nothing declared, the result is
// untrusted and reverse's destinations are unknown, so the reversal waits
// for a person (the default taint profile's rule for undeclared
// destinations); with --mcp-config vouching for the result's refund_id it
// runs, and a trust declaration naming an argument the tool lacks is a
// usage error.
func TestRunMCPConfigTrust(t *testing.T) {
	run := func(extra ...string) (int, string, string) {
		till := newTillServer(t, false)
		srv := newChatServer(t,
			chatCalls([3]string{"call_1", "mcp1_refund", `{"order_id":"A"}`}),
			chatCalls([3]string{"call_2", "mcp1_reverse", `{"refund_id":"R-A"}`}),
			chatText("Refunded and reversed."))
		dir := t.TempDir()
		args := append([]string{"run", "--provider", "openai", "--base-url", srv.srv.URL + "/v1", "--model", "any",
			"--mcp-url", till.web.URL, "--db", filepath.Join(dir, "t.db"), "--log", dir}, extra...)
		return call(append(args, "Refund A, then take it back.")...)
	}
	code, out, errOut := run()
	if m := runLine.FindStringSubmatch(lines(out)[0]); code != exitOK || m == nil || m[1] != "confirmation_required" ||
		!strings.Contains(out, "destination arguments are not declared") || !strings.Contains(out, `refund_id = \"r-a\"`) {
		t.Errorf("nothing declared: exit %d, stdout %q, stderr %q; want the reversal held, naming the id", code, out, errOut)
	}
	code, out, errOut = run("--mcp-config", writeFile(t, "mcp.json",
		`{"mcp1": {"trust": {"reads_private": false}, "tools": {"refund": {"trust": {"trusted_fields": ["refund_id"]}}}}}`))
	if m := runLine.FindStringSubmatch(lines(out)[len(lines(out))-1]); code != exitOK || m == nil || m[1] != "final_answer" {
		t.Errorf("refund_id trusted: exit %d, stdout %q, stderr %q; want final_answer", code, out, errOut)
	}
	code, out, errOut = run("--mcp-config", writeFile(t, "mcp.json",
		`{"mcp1": {"tools": {"reverse": {"trust": {"destinations": ["refund"]}}}}}`))
	if code != exitUsage || out != "" || !strings.Contains(errOut, `tool "reverse": configuration: trust: destination "refund" is not an argument`) {
		t.Errorf("bad destination: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestMCPConfigRecordedAbsolute: a run records its --mcp-config file by
// its absolute path, so that a resume from another directory reads the
// same file.
func TestMCPConfigRecordedAbsolute(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	f := sourceFlags{mcpConfig: "mcp.json"}
	want := " --mcp-config " + shellQuote(filepath.Join(dir, "mcp.json"))
	if got := f.canonical(); !strings.Contains(got, want) {
		t.Errorf("recorded flags %q; want %q in them", got, want)
	}
}
