// Command toolloop is the command line of toolloop, a runtime for the
// controlled tool-calling loop of LLM applications: the sandbox (demo),
// runs on real providers (run), and the durable runs' commands (runs,
// approve, deny, resume, trace) and replay. 'toolloop help' lists them; package
// internal/cli has them all.
//
// This build runs the loop in its own process. The Temporal build, with a
// worker command and --temporal flags, is temporal/cmd/toolloop.
//
// The program is cli.Main on the process's arguments, streams and
// environment, with an interrupt (Ctrl-C) canceling the context; its exit
// code is Main's. It is the only place that reads the process's environment
// (os.Getenv goes to Main as a function), so every package below takes its
// configuration as arguments.
package main
