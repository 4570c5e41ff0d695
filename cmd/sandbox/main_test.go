package main

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolloop/toolloop/internal/cli"
	"github.com/toolloop/toolloop/trace"
)

// heavyModules are modules the sandbox never uses and that a cold build
// pays dearly for (docs/BENCHMARKS.md has the figures): each is named with
// what it is, for the failure message.
var heavyModules = map[string]string{
	"github.com/openai/openai-go/v3":            "OpenAI's SDK",
	"github.com/anthropics/anthropic-sdk-go/v2": "Anthropic's SDK",
	"google.golang.org/genai":                   "Google's Gen AI SDK, with gRPC behind it",
	"modernc.org/sqlite":                        "the pure-Go SQLite driver",
	"modernc.org/libc":                          "the SQLite driver's C library, translated to Go",
	"google.golang.org/grpc":                    "gRPC",
	"google.golang.org/protobuf":                "protobuf",
	"go.opentelemetry.io/otel/sdk":              "the OpenTelemetry SDK",
	"github.com/modelcontextprotocol/go-sdk":    "the MCP SDK",
	"github.com/jackc/pgx/v5":                   "pgx, the PostgreSQL driver",
	"go.temporal.io/sdk":                        "the Temporal SDK",
}

// lightModules are the modules outside this one that the sandbox may
// compile: what the loop itself needs. A module that is neither here nor
// among heavyModules fails the test until someone measures its cold build
// and adds it to one list or the other.
var lightModules = []string{
	"github.com/google/jsonschema-go",          // tool: typed tools' schemas from Go types
	"github.com/santhosh-tekuri/jsonschema/v6", // tool: validates arguments against the schemas
	"golang.org/x/text",                        // santhosh-tekuri/jsonschema's error messages
}

// heavyPackages are packages of the standard library the sandbox never
// uses and that a cold build pays for (net/http and what it brings: TLS,
// HTTP/2, certificates), each named with what it is. Only the provider
// adapters speak HTTP, through llm/llmhttp; package llm, the loop and
// llmtest must not import net/http.
var heavyPackages = map[string]string{
	"net/http":   "the HTTP client and server",
	"crypto/tls": "TLS",
}

// build is what go list reports a pattern's build compiles (test files and
// their imports left out): every package with its module and imports.
type build struct {
	roots   []string            // the packages the pattern names
	module  map[string]string   // a package's module; "" for the standard library
	imports map[string][]string // a package's direct imports
}

func listBuild(t *testing.T, pattern string) build {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the dependencies: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f",
		"{{.ImportPath}}\t{{.DepOnly}}\t{{with .Module}}{{.Path}}{{end}}\t{{join .Imports \" \"}}", pattern).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps %s: %v\n%s", pattern, err, stderr)
	}
	b := build{module: map[string]string{}, imports: map[string][]string{}}
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		if len(f) != 4 {
			t.Fatalf("go list -deps %s: unexpected line %q", pattern, line)
		}
		if f[1] == "false" {
			b.roots = append(b.roots, f[0])
		}
		b.module[f[0]] = f[2]
		b.imports[f[0]] = strings.Fields(f[3])
	}
	if len(b.roots) == 0 {
		t.Fatalf("go list -deps %s listed no package of its own", pattern)
	}
	return b
}

// modules returns the modules, this one included, that b's packages come
// from, sorted.
func (b build) modules() []string {
	var mods []string
	for _, m := range b.module {
		if m != "" && !slices.Contains(mods, m) {
			mods = append(mods, m)
		}
	}
	slices.Sort(mods)
	return mods
}

// chain returns a shortest chain of imports from one of b's roots to pkg,
// both ends included, or nil when b does not compile pkg.
func (b build) chain(pkg string) []string {
	from := map[string]string{} // a package reached -> the package that imports it
	queue := slices.Clone(b.roots)
	for _, r := range b.roots {
		from[r] = ""
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == pkg {
			var c []string
			for ; p != ""; p = from[p] {
				c = append(c, p)
			}
			slices.Reverse(c)
			return c
		}
		for _, q := range b.imports[p] {
			if _, seen := from[q]; !seen {
				from[q] = p
				queue = append(queue, q)
			}
		}
	}
	return nil
}

// unwanted returns, for each module and heavy package of the standard
// library in b that the sandbox must not compile, a line saying what it is;
// a package's line names the imports that brought it in.
func unwanted(b build) []string {
	var bad []string
	for _, m := range b.modules() {
		switch what, heavy := heavyModules[m]; {
		case m == "github.com/toolloop/toolloop" || slices.Contains(lightModules, m):
		case heavy:
			bad = append(bad, m+": "+what)
		default:
			bad = append(bad, m+": not among the modules the sandbox may compile (lightModules); "+
				"measure a cold build of ./cmd/sandbox with it and list it")
		}
	}
	for _, p := range slices.Sorted(maps.Keys(heavyPackages)) {
		if c := b.chain(p); c != nil {
			bad = append(bad, p+": "+heavyPackages[p]+", imported through "+strings.Join(c, " -> "))
		}
	}
	return bad
}

// TestDependenciesStayLean: the README's first command compiles only the
// loop and the sandbox, never a provider SDK, the SQLite or PostgreSQL
// driver, gRPC, OpenTelemetry, MCP or Temporal, nor the standard library's
// HTTP client and TLS. The same check run on toolloop (cmd/toolloop) and
// store/postgres must find the heavy modules and packages there, so a
// check that sees nothing cannot pass.
func TestDependenciesStayLean(t *testing.T) {
	sandbox := listBuild(t, ".")
	mods := sandbox.modules()
	if !slices.Contains(mods, "github.com/toolloop/toolloop") || !slices.Contains(mods, "github.com/google/jsonschema-go") {
		t.Fatalf("go list found modules %v; want at least this one and jsonschema-go, which the loop needs", mods)
	}
	for _, line := range unwanted(sandbox) {
		t.Errorf("the sandbox's build includes %s", line)
	}

	toolloop := listBuild(t, "../toolloop")
	found := append(unwanted(toolloop), unwanted(listBuild(t, "../../store/postgres"))...)
	for _, m := range []string{
		"github.com/openai/openai-go/v3", "github.com/anthropics/anthropic-sdk-go/v2", "google.golang.org/genai",
		"modernc.org/sqlite", "modernc.org/libc", "google.golang.org/grpc", "go.opentelemetry.io/otel/sdk",
		"github.com/modelcontextprotocol/go-sdk", "github.com/jackc/pgx/v5", "net/http", "crypto/tls",
	} {
		if !slices.ContainsFunc(found, func(line string) bool { return strings.HasPrefix(line, m+": ") }) {
			t.Errorf("the check does not flag %s in toolloop's or store/postgres's build, where it is", m)
		}
	}
	// A package's line names a chain from the command to the package,
	// each step an import go list reports.
	c := toolloop.chain("crypto/tls")
	if len(c) < 2 || c[0] != "github.com/toolloop/toolloop/cmd/toolloop" || c[len(c)-1] != "crypto/tls" {
		t.Fatalf("the chain to crypto/tls in toolloop's build is %v; want one from cmd/toolloop to crypto/tls", c)
	}
	for i := 1; i < len(c); i++ {
		if !slices.Contains(toolloop.imports[c[i-1]], c[i]) {
			t.Errorf("the chain %v says %s imports %s; it does not", c, c[i-1], c[i])
		}
	}
}

// TestSameLinesAsToolloopDemo: the sandbox alone prints, byte for byte,
// what toolloop demo prints for every default scenario, with the traces
// and plans.
func TestSameLinesAsToolloopDemo(t *testing.T) {
	ctx := context.Background()
	var lean, leanErr, full, fullErr bytes.Buffer
	if code := run(ctx, []string{"--trace", "--plan"}, &lean, &leanErr); code != exitOK {
		t.Fatalf("sandbox: exit %d\n%s", code, &leanErr)
	}
	if code := cli.Main(ctx, []string{"demo", "--trace", "--plan"}, &full, &fullErr, nil, nil); code != 0 {
		t.Fatalf("toolloop demo: exit %d\n%s", code, &fullErr)
	}
	if lean.String() != full.String() {
		t.Errorf("the outputs differ\nsandbox:\n%s\ntoolloop demo:\n%s", &lean, &full)
	}
	if !strings.HasPrefix(lean.String(), "# trace mode=normal run=run-normal\n") ||
		!strings.Contains(lean.String(), "\nmode=normal status=final_answer\n") {
		t.Errorf("the output lacks the first scenario's trace and stop line:\n%s", &lean)
	}
	if leanErr.Len() > 0 {
		t.Errorf("sandbox wrote to stderr:\n%s", &leanErr)
	}
}

// TestWhatOnlyToolloopDemoHas: the interactive scenario and the flags this
// command leaves out are usage errors that name the command that has them.
func TestWhatOnlyToolloopDemoHas(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "confirm_refund"}, "run it with go run ./cmd/toolloop demo --mode confirm_refund"},
		{[]string{"--db", "x.db"}, "--db and --exporter are toolloop demo's: go run ./cmd/toolloop demo --help"},
		{[]string{"--mode", "nope"}, `unknown mode "nope"; valid modes: normal, `},
		{[]string{"normal"}, `unexpected argument "normal" (did you mean --mode normal?)`},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tc.args, &stdout, &stderr); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", tc.args, code, exitUsage)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: stderr %q, want it to say %q", tc.args, stderr.String(), tc.want)
		}
		if stdout.Len() > 0 {
			t.Errorf("%v: ran something:\n%s", tc.args, &stdout)
		}
	}
}

// TestLogAndHelp: --log writes the run's log where trace show reads it,
// and --help lists the default modes and exits 0.
func TestLogAndHelp(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--mode", "normal", "--log", dir}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d\n%s", code, &stderr)
	}
	if stdout.String() != "mode=normal status=final_answer\n" {
		t.Errorf("stdout %q", stdout.String())
	}
	events, _, err := trace.Open("run-normal", dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) == 0 || events[len(events)-1].Status != "final_answer" {
		t.Errorf("the log in %s holds %d events, not a run that ended final_answer", dir, len(events))
	}
	if _, err := os.Stat(filepath.Join(dir, "run-normal.jsonl")); err != nil {
		t.Error(err)
	}

	stdout.Reset()
	if code := run(context.Background(), []string{"--help"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("--help: exit %d", code)
	}
	for _, want := range []string{"Usage: go run ./cmd/sandbox", "\n  refund_unknown ", " tool_outcome_unknown "} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, &stdout)
		}
	}
	if strings.Contains(stdout.String(), "\n  confirm_refund ") {
		t.Errorf("--help lists confirm_refund among the modes it runs:\n%s", &stdout)
	}
}
