package cli

import (
	"flag"
	"io"
	"testing"
)

// The argument limits are budgets like the others: set by flag, and never
// negative.
func TestArgumentLimitFlags(t *testing.T) {
	parse := func(args ...string) (*budgetFlags, error) {
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		b := addBudgetFlags(fs)
		return b, fs.Parse(args)
	}
	b, err := parse("--max-argument-bytes", "4096", "--max-argument-depth", "10")
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.budgets()
	if err != nil || got.MaxArgumentBytes != 4096 || got.MaxArgumentDepth != 10 {
		t.Fatalf("budgets %+v, %v", got, err)
	}
	b, err = parse("--max-argument-bytes", "-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.budgets(); err == nil {
		t.Fatal("a negative --max-argument-bytes was accepted")
	}
}
