package loop

import (
	"context"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/policy"
)

// UpdateKind says what an Update reports.
type UpdateKind string

// Update kinds, in the order a step produces them. A step's updates come
// in this order: its model deltas (when the model streams), the assembled
// turn, then per call of the turn validated and authorized, the plan,
// each stage's calls started and finished, the compensations when a group
// failed, and the step finished; the run's last update is its stop.
const (
	// UpdateDelta carries a piece of the model's turn as it streams
	// (Delta). Nothing is ever taken back: a stream that breaks after its
	// first delta is not retried (see Config.Watch).
	UpdateDelta UpdateKind = "delta"
	// UpdateModelResponded carries the turn as the log records it
	// (Response), whether it was streamed or not.
	UpdateModelResponded UpdateKind = "model_responded"
	// UpdateCallValidated says whether a call's tool is known and its
	// arguments are valid (Check). Like every call update it comes after
	// the turn is assembled, so the call's arguments are complete.
	UpdateCallValidated UpdateKind = "call_validated"
	// UpdateCallAuthorized carries the policy's decision on a valid call
	// (Decision).
	UpdateCallAuthorized UpdateKind = "call_authorized"
	// UpdateStagePlanned carries the plan of the turn's calls, with the
	// planner's reasons (Plan).
	UpdateStagePlanned UpdateKind = "stage_planned"
	// UpdateCallStarted says a call of stage Stage began to run.
	UpdateCallStarted UpdateKind = "call_started"
	// UpdateCallFinished carries a call's outcome (Outcome: its result's
	// status, its duration and attempts).
	UpdateCallFinished UpdateKind = "call_finished"
	// UpdateCompensated carries what the compensations of an
	// all-or-nothing group did (Compensations), once they are done.
	UpdateCompensated UpdateKind = "compensated"
	// UpdateStepFinished says step Step is over, its calls done or the
	// run stopping: Usage is its model turn's usage, Total the run's.
	UpdateStepFinished UpdateKind = "step_finished"
	// UpdateStopped is the run's last update: its Status and Detail.
	UpdateStopped UpdateKind = "stopped"
)

// Update is one thing that happened in a run, for Config.Watch. Which
// fields are set depends on Kind; what they point to is the run's own
// (shared with its log and result): read it, do not change it, and copy
// what you keep.
type Update struct {
	Kind UpdateKind
	// Step is the model turn the update belongs to, from 1.
	Step int
	// Delta: UpdateDelta.
	Delta llm.Delta
	// Response: UpdateModelResponded.
	Response *llm.Response
	// Call is the call a call update is about, and Index its place in
	// the turn's calls.
	Call  *llm.ToolCall
	Index int
	// Check: UpdateCallValidated.
	Check *CallCheck
	// Decision: UpdateCallAuthorized.
	Decision *policy.Decision
	// Plan: UpdateStagePlanned.
	Plan *executor.Plan
	// Stage: UpdateCallStarted, UpdateCallFinished.
	Stage int
	// Outcome: UpdateCallFinished.
	Outcome *executor.Outcome
	// Compensations: UpdateCompensated.
	Compensations []CompensationOutcome
	// Usage and Total: UpdateStepFinished.
	Usage, Total llm.Usage
	// Status and Detail: UpdateStopped.
	Status Status
	Detail string
}

// watch tells Config.Watch what ev, just appended, did; before is the
// batch as it was before the decider took ev, and eff what it asked for.
func (d *drive) watch(ev *Event, before *Batch, eff Effect) {
	w := d.r.cfg.Watch
	if w == nil {
		return
	}
	ctx, s := d.ctx, &d.state
	switch ev.Kind {
	case ModelResponded:
		d.openStep, d.stepUsage = s.Steps, ev.Response.Usage.Clamped()
		w(ctx, Update{Kind: UpdateModelResponded, Step: s.Steps, Response: ev.Response})
	case CallsValidated:
		if before != nil && len(ev.Checks) == len(before.Calls) {
			for i := range ev.Checks {
				w(ctx, Update{Kind: UpdateCallValidated, Step: before.Step, Call: &before.Calls[i], Index: i, Check: &ev.Checks[i]})
			}
		}
	case PolicyDecided:
		if before != nil && len(ev.Decisions) == len(before.Calls) {
			for i := range ev.Decisions {
				if ev.Decisions[i].Verdict != "" {
					w(ctx, Update{Kind: UpdateCallAuthorized, Step: before.Step, Call: &before.Calls[i], Index: i, Decision: &ev.Decisions[i]})
				}
			}
		}
	case StagePlanned:
		if before != nil && ev.Plan != nil {
			w(ctx, Update{Kind: UpdateStagePlanned, Step: before.Step, Plan: ev.Plan})
		}
	case Compensated:
		w(ctx, Update{Kind: UpdateCompensated, Step: s.Steps, Compensations: ev.Compensations})
	}
	if d.openStep > 0 && (eff.Kind == RequestModel || eff.Kind == Stop || eff.Kind == None) {
		w(ctx, Update{Kind: UpdateStepFinished, Step: d.openStep, Usage: d.stepUsage, Total: s.Usage})
		d.openStep = 0
	}
	if ev.Kind == Stopped {
		w(ctx, Update{Kind: UpdateStopped, Step: s.Steps, Status: ev.Status, Detail: ev.Detail})
	}
}

// stageWatch returns the executor's watcher for the stage whose batch
// indexes are idx, which tells Config.Watch of each call's start and
// finish; nil without a Watch.
func (d *drive) stageWatch(ctx context.Context, stage int, idx []int) func(executor.CallEvent) {
	w, b := d.r.cfg.Watch, d.state.Batch
	if w == nil || b == nil {
		return nil
	}
	return func(ce executor.CallEvent) {
		i := idx[ce.Index]
		u := Update{Kind: UpdateCallStarted, Step: b.Step, Call: &b.Calls[i], Index: i, Stage: stage}
		if ce.Outcome != nil {
			u.Kind, u.Outcome = UpdateCallFinished, ce.Outcome
		}
		w(ctx, u)
	}
}
