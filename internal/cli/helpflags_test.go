package cli

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

// toolloop help run names every model, tool and budget flag that toolloop
// run takes: the help is written by hand, and a flag left out of it is
// one a user cannot find.
func TestRunHelpNamesEveryFlag(t *testing.T) {
	fs := flag.NewFlagSet("toolloop run", flag.ContinueOnError)
	addSourceFlags(fs)
	addBudgetFlags(fs)
	var help bytes.Buffer
	runUsage(&help)
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(help.String(), "--"+f.Name+" ") {
			t.Errorf("toolloop help run does not name --%s", f.Name)
		}
	})
}
