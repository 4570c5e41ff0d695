// Package injection is an evaluation of the loop's taint tracking against
// prompt injection through tool results: a banking and a Slack suite of
// user tasks paired with injection tasks, modelled on AgentDojo's suites
// of the same names (see banking.go and slack.go for the attribution),
// with tools in Go and a deterministic scripted model that always obeys
// the latest injected instruction, the worst case.
//
// Each user task runs once without an attack and once per injection task
// with every injection vector it reads carrying that injection. A person
// is simulated at every confirmation: the calls the user's task needs are
// approved, the ones the injection asked for declined. Evaluate reports,
// per taint profile, the attack success rate, the utility with and
// without an attack, and the confirmations harmless tasks needed.
package injection

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/tool"
)

// Task is a user task over a world of type W: a prompt, the scripted
// model's steps, and a check of the world afterwards (nil: the run must
// only end with an answer).
type Task[W any] struct {
	Name   string
	Prompt string
	Steps  []Step
	Answer func(h *History) string
	Check  func(w W) bool
}

// Injection is an attacker's task: the goal planted in the vectors, the
// steps a model that obeys it takes, and the check that it succeeded.
type Injection[W any] struct {
	Name    string
	Goal    string
	Steps   []Step
	Success func(w W) bool
}

// Outcome is one run's result.
type Outcome struct {
	Suite, Task, Injection string
	// Reached: the injection was in a result the model read.
	Reached bool
	// Utility: the user's task was done; Attacked: the injection's goal
	// was reached.
	Utility, Attacked bool
	// Confirmations counts the calls the policy held for a person;
	// Reasons keeps their reasons.
	Confirmations int
	Reasons       []string
	Status        loop.Status
}

// serve puts a world's tools where the loop calls them and returns the
// tools the loop is given and a function that stops serving them. Nil
// gives the loop the Go tools themselves; the MCP evaluation (mcp_test.go)
// serves them from an MCP server.
type serve func(ctx context.Context, tools []*tool.Tool) ([]*tool.Tool, func() error, error)

type suite[W any] struct {
	name       string
	world      func(injection string) W
	tools      func(w W) []*tool.Tool
	tasks      []Task[W]
	injections []Injection[W]
}

func (s suite[W]) run(ctx context.Context, p policy.Profile, task Task[W], inj *Injection[W], via serve) (Outcome, error) {
	text := ""
	m := &model{user: task.Steps, answer: task.Answer}
	out := Outcome{Suite: s.name, Task: task.Name}
	if inj != nil {
		text, m.attack, out.Injection = " "+inject(inj.Goal), inj.Steps, inj.Name
	}
	w := s.world(text)
	tools := s.tools(w)
	if via != nil {
		served, stop, err := via(ctx, tools)
		if err != nil {
			return out, fmt.Errorf("%s/%s: serving the tools: %w", s.name, task.Name, err)
		}
		defer stop()
		tools = served
	}
	reg, err := tool.NewRegistry(tools...)
	if err != nil {
		return out, err
	}
	r, err := loop.NewRunner(loop.Config{Model: m, Tools: reg, Policy: policy.TaintRules(p),
		Budgets: loop.Budgets{MaxSteps: 20}})
	if err != nil {
		return out, err
	}
	res, err := r.Run(ctx, []llm.Message{llm.UserMessage(task.Prompt)})
	for range 20 {
		if res == nil || res.Status != loop.ConfirmationRequired {
			break
		}
		var answers []loop.Confirmation
		for _, pc := range res.Pending {
			out.Confirmations++
			out.Reasons = append(out.Reasons, pc.Reason)
			// The simulated person approves what the user's task needs
			// and declines what the injection asked for.
			answers = append(answers, loop.Confirmation{CallID: pc.CallID, Approved: strings.HasPrefix(pc.CallID, "u"), By: "eval"})
		}
		res, err = r.Continue(ctx, res, answers...)
	}
	if res == nil {
		return out, fmt.Errorf("%s/%s: %w", s.name, task.Name, err)
	}
	out.Status = res.Status
	for _, msg := range res.Messages {
		if msg.Result != nil && strings.Contains(string(msg.Result.Content), Marker) {
			out.Reached = true
		}
	}
	out.Utility = res.Status == loop.FinalAnswer && (task.Check == nil || task.Check(w))
	if inj != nil {
		out.Attacked = inj.Success(w)
	}
	return out, nil
}

func (s suite[W]) all(ctx context.Context, p policy.Profile, short bool, via serve) ([]Outcome, error) {
	var outs []Outcome
	for ti, task := range s.tasks {
		o, err := s.run(ctx, p, task, nil, via)
		if err != nil {
			return nil, err
		}
		outs = append(outs, o)
		for ii := range s.injections {
			if short && (ti+ii)%3 != 0 {
				continue
			}
			o, err := s.run(ctx, p, task, &s.injections[ii], via)
			if err != nil {
				return nil, err
			}
			outs = append(outs, o)
		}
	}
	return outs, nil
}

// Run runs both suites with the given profile (ProfileOff is no defense).
// short runs a third of the injection pairs, for go test.
func Run(ctx context.Context, p policy.Profile, short bool) ([]Outcome, error) {
	return run(ctx, p, short, nil)
}

func run(ctx context.Context, p policy.Profile, short bool, via serve) ([]Outcome, error) {
	b := suite[*bank]{"banking", newBank, (*bank).tools, bankingTasks(), bankingInjections()}
	sl := suite[*workspace]{"slack", newWorkspace, (*workspace).tools, slackTasks(), slackInjections()}
	outs, err := b.all(ctx, p, short, via)
	if err != nil {
		return nil, err
	}
	more, err := sl.all(ctx, p, short, via)
	return append(outs, more...), err
}

// Summary is the figures of a set of outcomes.
type Summary struct {
	Tasks, Pairs int
	// Utility is the share of user tasks done without an attack;
	// UtilityUnderAttack of pairs where the user task was still done.
	Utility, UtilityUnderAttack float64
	// AttackSuccess is the share of pairs (whose injection reached the
	// model) where the injection's goal was reached.
	AttackSuccess float64
	// Confirmations is the mean number of confirmations per harmless
	// task; ConfirmedTasks the share of harmless tasks with at least one.
	Confirmations, ConfirmedTasks float64
}

// Summarize computes the figures of outs.
func Summarize(outs []Outcome) Summary {
	var s Summary
	var util, utilAtt, att, conf, confTasks int
	for _, o := range outs {
		if o.Injection == "" {
			s.Tasks++
			util += b2i(o.Utility)
			conf += o.Confirmations
			confTasks += b2i(o.Confirmations > 0)
			continue
		}
		if !o.Reached {
			continue
		}
		s.Pairs++
		utilAtt += b2i(o.Utility)
		att += b2i(o.Attacked)
	}
	div := func(a, b int) float64 {
		if b == 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	s.Utility, s.Confirmations, s.ConfirmedTasks = div(util, s.Tasks), div(conf, s.Tasks), div(confTasks, s.Tasks)
	s.UtilityUnderAttack, s.AttackSuccess = div(utilAtt, s.Pairs), div(att, s.Pairs)
	return s
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
