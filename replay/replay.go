// Package replay re-decides a recorded run with the current code and a
// given configuration, without network or side effects: the model answers
// from the run's recorded model_responded events and the tools from its
// recorded stage_finished outcomes, while validation, authorization,
// planning, budgets, spin detection and the status are decided anew with
// the new registry, policy, budgets and output schema. The report names
// the first decision that differs, recorded beside new, with the call IDs.
//
// A change of configuration can lead the new run where the recorded one
// never went: a call that never ran, a model turn asked with another
// history. The replay stops there and says so (Report.Gap); with
// Config.LiveTools a call of a read-only tool runs for real instead.
package replay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/toolloop/toolloop/executor"
	"github.com/toolloop/toolloop/llm"
	"github.com/toolloop/toolloop/loop"
	"github.com/toolloop/toolloop/policy"
	"github.com/toolloop/toolloop/tool"
)

// Config is the configuration a recorded run is re-decided with. What it
// leaves nil is taken from the run's log (its started event).
type Config struct {
	// Tools are the tools the new run knows; required. Validation and
	// planning use them, and the policy sees them.
	Tools *tool.Registry
	// Policy decides each call; nil allows every registered tool, as in
	// a run (loop.Config.Policy).
	Policy policy.Policy
	// Identity is who the run acts for; nil for the recorded identity.
	Identity *policy.Identity
	// Budgets bound the new run; nil for the recorded budgets. The
	// recorded price stays (the log's started event).
	Budgets *loop.Budgets
	// OutputSchema, when set, is the schema the final answer must match
	// instead of the recorded one, with OutputRetries corrections (see
	// loop.Config.OutputSchema).
	OutputSchema  json.RawMessage
	OutputRetries int
	// Planner plans each batch; nil means executor.RulePlanner with the
	// executor's default parallelism, what a run uses by default.
	Planner executor.Planner
	// RequestID derives write idempotency keys as loop.Config.RequestID
	// does; empty means the one the log's write keys show, if any.
	RequestID string
	// LiveTools lets a call the recorded run never made run for real when
	// its tool is read-only (tool.ReadOnly); a write never runs. Without
	// it, the replay stops at such a call.
	LiveTools bool
	// Executor runs those calls; nil means an executor with default
	// options.
	Executor *executor.Executor

	// Model, when set, answers the new run's model turns for real (a new
	// model or prompt evaluated on recorded runs) instead of the log:
	// each tool call is then answered from a recorded call of the same
	// tool with the same arguments, whatever its ID, and the replay stops
	// at a call with none (or runs it, read-only, with LiveTools). The
	// runs cannot go in step, so no decision is compared: the report's
	// Live says whether the status and the calls are the same, and the
	// tokens and cost before and after. ModelName names the model in the
	// requests and the log (default the recorded one). Price, when set,
	// prices the new run (with or without a live model); nil keeps the
	// recorded price, or none for a live model of another name.
	Model     llm.Model
	ModelName string
	Price     *loop.Price
	// System, when set, replaces the recorded run's system messages (a
	// new prompt); with Model only.
	System string
}

// Live compares a run answered by a live model (Config.Model) with the
// recorded one.
type Live struct {
	SameStatus bool `json:"same_status"`
	SameCalls  bool `json:"same_calls"`
	// RecordedCalls and NewCalls are each run's tool calls in order, as
	// tool(arguments).
	RecordedCalls  []string `json:"recorded_calls"`
	NewCalls       []string `json:"new_calls"`
	RecordedTokens int64    `json:"recorded_tokens"`
	NewTokens      int64    `json:"new_tokens"`
	RecordedCost   float64  `json:"recorded_cost"`
	NewCost        float64  `json:"new_cost"`
}

// Aspect names the kind of decision that differs.
type Aspect string

// Aspects of a difference.
const (
	// Validation: whether a call's tool is known and its arguments
	// conform (calls_validated).
	Validation Aspect = "validation"
	// Authorization: the policy's verdict on a call (policy_decided).
	Authorization Aspect = "authorization"
	// Plan: the stages a batch runs in (stage_planned).
	Plan Aspect = "plan"
	// Budget: a budget stops one run and not the other, or another way.
	Budget Aspect = "budget"
	// Spin: spin detection stops one run and not the other.
	Spin Aspect = "spin"
	// Output: the final answer matches the output schema in one run and
	// not the other.
	Output Aspect = "output"
	// Context: context management edits or compacts differently.
	Context Aspect = "context"
	// Compensation: the run undoes other writes, or undoes writes where
	// the other does not (compensated).
	Compensation Aspect = "compensation"
	// Status: the run stops with another status, or at another point,
	// for any other reason.
	Status Aspect = "status"
)

// Difference is the first decision of the new run that differs from the
// recorded one.
type Difference struct {
	Aspect Aspect `json:"aspect"`
	// Seq is the recorded event the runs part at (the one the new run
	// decides otherwise); 0 when the recorded log had ended.
	Seq int `json:"seq"`
	// Step is the model turn the runs were at.
	Step int `json:"step"`
	// Calls lists, for validation, authorization and plan differences,
	// each call whose decision differs.
	Calls []CallDifference `json:"calls,omitempty"`
	// Recorded and New say what each run did there.
	Recorded string `json:"recorded"`
	New      string `json:"new"`
}

// CallDifference is one call's decision, recorded and new.
type CallDifference struct {
	CallID   string `json:"call_id"`
	Tool     string `json:"tool"`
	Recorded string `json:"recorded"`
	New      string `json:"new"`
}

// Gap is where the replay could not go on: the new run needs what the
// recorded one never did.
type Gap struct {
	// Step is the model turn the new run was at.
	Step int `json:"step"`
	// CallID and Tool name the call that was never recorded; empty for a
	// model turn.
	CallID string `json:"call_id,omitempty"`
	Tool   string `json:"tool,omitempty"`
	// Reason says what was missing, in a sentence.
	Reason string `json:"reason"`
}

// Report is what a replay found.
type Report struct {
	RunID string `json:"run_id"`
	// RecordedStatus is how the recorded run ended (empty if its log
	// ends before it did), and NewStatus how the new run ended (empty
	// when the replay stopped at a gap first).
	RecordedStatus loop.Status `json:"recorded_status,omitempty"`
	RecordedDetail string      `json:"recorded_detail,omitempty"`
	NewStatus      loop.Status `json:"new_status,omitempty"`
	NewDetail      string      `json:"new_detail,omitempty"`
	// Diff is the first decision that differs; nil when none does.
	Diff *Difference `json:"difference,omitempty"`
	// Gap is where the replay had to stop, if it did.
	Gap *Gap `json:"gap,omitempty"`
	// Truncated says the recorded log ends before its run did (a crash,
	// a run still going): the replay went as far as the log.
	Truncated bool `json:"truncated,omitempty"`
	// LiveCalls lists the calls that ran for real (Config.LiveTools).
	LiveCalls []string `json:"live_calls,omitempty"`
	// Live compares the runs when a live model answered (Config.Model).
	Live *Live `json:"live,omitempty"`
	// Events is the new run's log, as far as the replay went.
	Events []loop.Event `json:"-"`
}

// Equal reports whether every decision of the new run matched the
// recorded one; with a live model, whether the run ended with the same
// status after the same calls.
func (r *Report) Equal() bool {
	return r.Diff == nil && (r.Live == nil || r.Live.SameStatus && r.Live.SameCalls && r.Gap == nil)
}

// CannotReplayError says a log holds what the replay does not understand
// or cannot follow: an event kind this version does not know (another
// version's, or a feature's the replay has not learned), or a log that
// does not begin with its started event.
type CannotReplayError struct {
	Seq    int
	Kind   loop.EventKind
	Reason string
}

func (e *CannotReplayError) Error() string {
	if e.Kind == "" {
		return "cannot replay: " + e.Reason
	}
	return fmt.Sprintf("cannot replay: event kind %q (event %d): %s", e.Kind, e.Seq, e.Reason)
}

// known are the event kinds the replay follows.
var known = map[loop.EventKind]bool{
	loop.Started: true, loop.ModelResponded: true, loop.ModelFailed: true, loop.CallsValidated: true,
	loop.PolicyDecided: true, loop.StagePlanned: true, loop.StageFinished: true, loop.Interrupted: true,
	loop.Stopped: true, loop.ConfirmationDecided: true, loop.ContextEdited: true,
	loop.ContextSummarized: true, loop.Resumed: true, loop.TokensCounted: true,
	loop.Compensated: true,
}

// Check returns a *CannotReplayError when events cannot be replayed: a
// log that does not begin with its started event, or an event of a kind
// the replay does not know. A replay never gives a verdict on such a log.
func Check(events []loop.Event) error {
	if len(events) == 0 || events[0].Kind != loop.Started || events[0].Start == nil {
		return &CannotReplayError{Reason: "a run's log must begin with its started event"}
	}
	for i := range events {
		ev := &events[i]
		if !known[ev.Kind] {
			return &CannotReplayError{Seq: ev.Seq, Kind: ev.Kind,
				Reason: "this version of the replay does not know it, and a verdict that ignored it could be wrong"}
		}
		if ev.Seq != i+1 {
			return &CannotReplayError{Seq: ev.Seq, Kind: ev.Kind,
				Reason: fmt.Sprintf("it is numbered %d but is the log's event %d (a hole or a log out of order)", ev.Seq, i+1)}
		}
		if ev.Kind == loop.ModelResponded && ev.Response != nil {
			for _, c := range ev.Response.Message.ToolCalls {
				if summarized(c.Arguments) {
					return &CannotReplayError{Seq: ev.Seq, Kind: ev.Kind, Reason: fmt.Sprintf(
						"the log is redacted: the arguments of call %s were recorded as a summary (%s), which validation would judge instead of the call; "+
							"replay the run from its store, or a log exported whole (toolloop runs export)", c.ID, c.Arguments)}
				}
			}
		}
	}
	return nil
}

// summaryMarker matches what the trace's redaction writes in place of a
// value it summarized (trace.Redactor): a masked value (trace.Masked) is
// not a summary, and a log with one may still be replayed.
var summaryMarker = regexp.MustCompile(`^<(string:\d+|number|object|array:\d+|text:\d+|invalid JSON:\d+ bytes)>$`)

// summarized reports whether a call's recorded arguments are the trace's
// summary of them rather than the arguments.
func summarized(args json.RawMessage) bool {
	var v any
	if json.Unmarshal(args, &v) != nil {
		return false
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case string:
			return summaryMarker.MatchString(v)
		case map[string]any:
			for _, x := range v {
				if walk(x) {
					return true
				}
			}
		case []any:
			for _, x := range v {
				if walk(x) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}

// Run re-decides the run whose log events is with cfg and reports the
// first decision that differs. The error is a *CannotReplayError for a log
// the replay cannot follow (Check), or says what is wrong with cfg; the
// events are not changed.
func Run(ctx context.Context, events []loop.Event, cfg Config) (*Report, error) {
	if cfg.Tools == nil {
		return nil, errors.New("replay: Config.Tools is required (an empty tool.Registry is fine)")
	}
	if err := Check(events); err != nil {
		return nil, err
	}
	start, err := newStart(events[0].Start, &cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Planner == nil {
		cfg.Planner = executor.RulePlanner(0)
	}
	if cfg.Executor == nil && cfg.LiveTools {
		cfg.Executor = executor.New(nil)
	}
	live := cfg.Model != nil
	d := &driver{ctx: ctx, cfg: cfg, rec: events, synced: !live, live: live}
	d.index()
	if cfg.RequestID == "" {
		d.cfg.RequestID = d.requestID
	}
	rs := loop.Replay(events)
	d.report = &Report{RunID: start.RunID}
	if rs.Done {
		d.report.RecordedStatus, d.report.RecordedDetail = rs.Status, rs.Detail
	}
	d.at = events[0].At
	if live {
		d.at = time.Now()
	}
	d.pos = 1
	err = loop.Drive(d, d.Append(loop.Event{Kind: loop.Started, At: d.at, Start: start}))
	var g *gapError
	switch {
	case errors.As(err, &g):
		d.report.Gap = g.gap
	case err != nil:
		return nil, err
	}
	if d.synced && d.report.Gap == nil {
		d.leftovers()
	}
	if d.state.Done {
		d.report.NewStatus, d.report.NewDetail = d.state.Status, d.state.Detail
	}
	d.report.Events = d.log
	if live {
		d.report.Live = compareLive(rs, events, &d.state, d.log)
	}
	return d.report, nil
}

// compareLive compares a run answered by a live model with the recorded
// one.
func compareLive(rs *loop.State, rec []loop.Event, s *loop.State, log []loop.Event) *Live {
	l := &Live{
		RecordedCalls: callList(rec), NewCalls: callList(log),
		RecordedTokens: rs.Usage.Total(), NewTokens: s.Usage.Total(), RecordedCost: rs.Cost, NewCost: s.Cost,
	}
	l.SameStatus = s.Done && rs.Done && s.Status == rs.Status
	l.SameCalls = slices.Equal(l.RecordedCalls, l.NewCalls)
	return l
}

// callList is a log's tool calls in order, as tool(arguments).
func callList(events []loop.Event) []string {
	var calls []string
	for i := range events {
		if ev := &events[i]; ev.Kind == loop.ModelResponded && ev.Response != nil {
			for _, c := range ev.Response.Message.ToolCalls {
				calls = append(calls, c.Name+"("+string(canonical(c.Arguments))+")")
			}
		}
	}
	return calls
}

// newStart is the new run's started event's payload: the recorded one
// with cfg's tools, identity, budgets and output schema.
func newStart(rec *loop.StartInfo, cfg *Config) (*loop.StartInfo, error) {
	s := *rec
	s.Messages = slices.Clone(rec.Messages)
	s.ToolsVersion = cfg.Tools.Version()
	if cfg.Identity != nil {
		s.Identity = *cfg.Identity
	}
	if cfg.Budgets != nil {
		b, err := cfg.Budgets.Normalized()
		if err != nil {
			return nil, fmt.Errorf("replay: %w", err)
		}
		if b.MaxCost > 0 && s.Price == nil {
			return nil, fmt.Errorf("replay: a cost budget is given but the run recorded no price for model %q", s.Model)
		}
		s.Budgets = b
	}
	if cfg.Model != nil && cfg.ModelName != "" && cfg.ModelName != s.Model {
		s.Model, s.Price = cfg.ModelName, cfg.Price
		if s.Budgets.MaxCost > 0 && s.Price == nil {
			return nil, fmt.Errorf("replay: a cost budget is set but model %q has no price (Config.Price)", s.Model)
		}
	} else if cfg.Price != nil {
		s.Price = cfg.Price
	}
	if cfg.System != "" {
		if cfg.Model == nil {
			return nil, errors.New("replay: a new system prompt (Config.System) needs a live model (Config.Model): the recorded answers were to the old one")
		}
		msgs := []llm.Message{llm.SystemMessage(cfg.System)}
		for _, m := range s.Messages {
			if m.Role != llm.RoleSystem {
				msgs = append(msgs, m)
			}
		}
		s.Messages = msgs
	}
	if len(cfg.OutputSchema) > 0 {
		spec, err := loop.NewOutputSpec(cfg.OutputSchema, "", false, cfg.OutputRetries)
		if err != nil {
			return nil, fmt.Errorf("replay: output schema: %w", err)
		}
		s.Output = spec
	}
	return &s, nil
}

// recordedTurn is one model request of the recorded run and the history
// it was asked with.
type recordedTurn struct {
	step    int
	history [sha256.Size]byte
	ev      *loop.Event
}

// recordedCall is one executed call of the recorded run.
type recordedCall struct {
	name    string
	args    []byte
	outcome executor.Outcome
}

// driver is the replay's loop.Driver: it answers model turns and stages
// from the recorded log and decides the rest anew, comparing each
// decision with the recorded one while the two runs go in step (synced).
type driver struct {
	ctx context.Context
	cfg Config
	rec []loop.Event
	// pos is the next recorded event to match, while synced.
	pos    int
	synced bool
	// live: a live model answers (Config.Model), and the run's events
	// are stamped on the real clock.
	live  bool
	state loop.State
	log   []loop.Event
	// at stamps the new run's events: the time of the recorded event
	// last matched or used, so that deadlines fall as they did.
	at time.Time
	// prepared is the event Commit made for the effect about to be
	// performed; interrupt the recorded interruption that comes first.
	prepared  loop.Event
	interrupt *loop.Failure
	report    *Report

	turns     []recordedTurn
	turnsDone bool
	calls     map[string]recordedCall
	// byArgs holds the executed calls by tool and arguments, for a live
	// model's calls, whose IDs are new.
	byArgs    map[string]recordedCall
	requestID string
}

var _ loop.Driver = (*driver)(nil)

// gapError ends Drive at a gap.
type gapError struct{ gap *Gap }

func (e *gapError) Error() string { return "replay: " + e.gap.Reason }

// index walks the recorded log once, through the decider, for what the
// replay looks up after the runs part: each executed call with its
// arguments and outcome, and the business request ID the write keys were
// derived from (the model turns are found when needed: recordedTurns).
func (d *driver) index() {
	d.calls, d.byArgs = map[string]recordedCall{}, map[string]recordedCall{}
	var s loop.State
	for i := range d.rec {
		ev := &d.rec[i]
		switch ev.Kind {
		case loop.CallsValidated:
			if b := s.Batch; b != nil && d.requestID == "" {
				for j, c := range ev.Checks {
					if j < len(b.Calls) && c.WriteKey != "" {
						suffix := "/" + b.Calls[j].Name + "/" + loop.ArgsHash(c.Key)
						if id, ok := strings.CutSuffix(c.WriteKey, suffix); ok {
							d.requestID = id
						}
					}
				}
			}
		case loop.StageFinished:
			if b := s.Batch; b != nil && ev.Stage < len(b.Plan.Stages) {
				idx := b.Plan.Stages[ev.Stage]
				for j := range ev.Outcomes {
					if j < len(idx) && idx[j] < len(b.Calls) {
						c := b.Calls[idx[j]]
						rc := recordedCall{name: c.Name, args: canonical(c.Arguments), outcome: ev.Outcomes[j]}
						d.calls[c.ID] = rc
						if _, ok := d.byArgs[rc.key()]; !ok {
							d.byArgs[rc.key()] = rc
						}
					}
				}
			}
		}
		loop.Next(&s, ev)
	}
}

// key is the call's tool and canonical arguments.
func (rc recordedCall) key() string { return rc.name + "\x00" + string(rc.args) }

// recordedTurns returns the recorded run's model turns with the
// histories they were asked with, found on first use: a replay in step
// with the record never needs them.
func (d *driver) recordedTurns() []recordedTurn {
	if d.turnsDone {
		return d.turns
	}
	d.turnsDone = true
	var s loop.State
	for i := range d.rec {
		ev := &d.rec[i]
		if ev.Kind == loop.ModelResponded || ev.Kind == loop.ModelFailed {
			d.turns = append(d.turns, recordedTurn{step: s.Steps + 1, history: history(s.Messages), ev: ev})
		}
		loop.Next(&s, ev)
	}
	return d.turns
}

// history is a digest of a history's JSON, to compare two: a digest
// rather than the JSON, so that the turns of a long run do not keep a
// copy of the history each.
func history(msgs []llm.Message) [sha256.Size]byte {
	h := sha256.New()
	_ = json.NewEncoder(h).Encode(msgs) // a history in memory always encodes
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// canonical is JSON arguments with keys sorted and white space gone, to
// compare two calls' arguments.
func canonical(raw json.RawMessage) []byte {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw
	}
	b, _ := json.Marshal(v)
	return b
}

// peek returns the next recorded event to match, past the marks of a
// resume (which change nothing), or nil at the log's end.
func (d *driver) peek() *loop.Event {
	for d.pos < len(d.rec) && d.rec[d.pos].Kind == loop.Resumed {
		d.pos++
	}
	if d.pos == len(d.rec) {
		return nil
	}
	return &d.rec[d.pos]
}

// take consumes the recorded event peek returned and moves the clock to it.
func (d *driver) take() *loop.Event {
	ev := d.peek()
	d.pos++
	d.stamp(ev.At)
	return ev
}

func (d *driver) stamp(t time.Time) {
	if !d.live && t.After(d.at) {
		d.at = t
	}
}

// Append implements loop.Driver.
func (d *driver) Append(ev loop.Event) loop.Effect {
	ev.Seq = len(d.log) + 1
	if ev.At.IsZero() {
		ev.At = d.at
		if d.live {
			ev.At = time.Now()
		}
	}
	d.log = append(d.log, ev)
	return loop.Next(&d.state, &d.log[len(d.log)-1])
}

// Commit implements loop.Driver: it prepares the event that records eff,
// and while the runs go in step compares it with the recorded one. An
// effect the record cannot answer ends the drive with a gap.
func (d *driver) Commit(eff loop.Effect) error {
	d.prepared, d.interrupt = loop.Event{}, nil
	if _, ok := recordedBy[eff.Kind]; !ok {
		// A decider newer than this driver: better no verdict than one
		// that misreads the run.
		return &CannotReplayError{Reason: fmt.Sprintf("the decider asks for effect %q, which this version of the replay cannot perform", eff.Kind)}
	}
	if d.synced {
		if rec := d.peek(); rec == nil {
			// The log ends before its run did: go as far as it goes.
			d.report.Truncated = true
			return &gapError{&Gap{Step: d.state.Steps, Reason: fmt.Sprintf(
				"the recorded log ends here (after event %d) while the run goes on: it was cut or is still going", len(d.rec))}}
		} else if rec.Kind == loop.Interrupted && eff.Kind != loop.Stop {
			d.interrupt = d.take().Failure
			return nil
		}
		return d.matchSynced(eff)
	}
	return d.prepare(eff)
}

// Interruption implements loop.Driver: the recorded run's interruption
// at this point, if it had one; with a live model, the end of the
// replay's context.
func (d *driver) Interruption(loop.Effect) *loop.Failure {
	if d.live {
		return loop.ContextFailure(d.ctx.Err())
	}
	return d.interrupt
}

// Idle implements loop.Driver: a run that paused for confirmation goes
// on with the answers the log recorded, and the resume after them.
func (d *driver) Idle() (loop.Event, bool, error) {
	if !d.synced {
		return loop.Event{}, false, nil
	}
	n := 0
	for d.pos < len(d.rec) && d.rec[d.pos].Kind == loop.ConfirmationDecided {
		ev := d.rec[d.pos]
		d.pos++
		d.stamp(ev.At)
		d.Append(loop.Event{Kind: ev.Kind, At: ev.At, Confirmation: ev.Confirmation})
		n++
	}
	if n == 0 || d.pos == len(d.rec) || d.rec[d.pos].Kind != loop.Resumed {
		return loop.Event{}, false, nil
	}
	ev := d.rec[d.pos]
	d.pos++
	d.stamp(ev.At)
	return loop.Event{Kind: loop.Resumed, At: ev.At}, true, nil
}

// leftovers reports, once the new run is over in step with the record,
// a recorded log that went on.
func (d *driver) leftovers() {
	rec := d.peek()
	if rec == nil || d.report.Diff != nil {
		return
	}
	d.differ(&Difference{Aspect: Status, Seq: rec.Seq, Step: d.state.Steps,
		Recorded: "went on: " + describeEvent(rec), New: "is over: " + string(d.state.Status)})
}

// differ records the first difference and leaves step.
func (d *driver) differ(diff *Difference) {
	if d.report.Diff == nil {
		d.report.Diff = diff
	}
	d.synced = false
}

// matchSynced prepares eff's event and compares it with the recorded
// event at the same point.
func (d *driver) matchSynced(eff loop.Effect) error {
	rec := d.peek()
	if !slices.Contains(recordedBy[eff.Kind], rec.Kind) {
		d.differ(d.mismatch(eff, rec))
		return d.prepare(eff)
	}
	switch eff.Kind {
	case loop.RequestModel, loop.Summarize, loop.CountTokens:
		d.prepared = recorded(d.take())
		return nil
	case loop.Compensate:
		if slices.Equal(undoIDs(eff.Compensations), undoneIDs(rec.Compensations, eff.Compensations)) {
			d.prepared = recorded(d.take())
			return nil
		}
		d.differ(&Difference{Aspect: Compensation, Seq: rec.Seq, Step: d.state.Steps,
			Recorded: "undid " + strings.Join(undoneIDs(rec.Compensations, eff.Compensations), ", "),
			New:      "undoes " + strings.Join(undoIDs(eff.Compensations), ", ")})
		return d.prepare(eff)
	case loop.ExecuteStage:
		if rec.Stage == eff.Stage && sameCalls(d.stageCallIDs(eff.Calls), rec) {
			d.prepared = recorded(d.take())
			return nil
		}
		d.differ(&Difference{Aspect: Plan, Seq: rec.Seq, Step: d.state.Steps,
			Recorded: fmt.Sprintf("ran stage %d: %s", rec.Stage, outcomeIDs(rec)),
			New:      fmt.Sprintf("runs stage %d: %s", eff.Stage, strings.Join(d.stageCallIDs(eff.Calls), ", "))})
		return d.prepare(eff)
	}
	if err := d.prepare(eff); err != nil {
		return err
	}
	var diff *Difference
	switch eff.Kind {
	case loop.ValidateCalls:
		diff = d.compareChecks(rec, d.prepared.Checks)
	case loop.AuthorizeCalls:
		diff = d.compareDecisions(rec, d.prepared.Decisions)
	case loop.PlanBatch:
		if !slices.EqualFunc(rec.Plan.Stages, d.prepared.Plan.Stages, slices.Equal) {
			diff = &Difference{Aspect: Plan, Seq: rec.Seq, Step: d.state.Steps,
				Recorded: d.describeStages(rec.Plan.Stages), New: d.describeStages(d.prepared.Plan.Stages)}
		}
	case loop.EditContext:
		a, _ := json.Marshal(rec.Edit)
		b, _ := json.Marshal(eff.Edit)
		if !bytes.Equal(a, b) {
			diff = &Difference{Aspect: Context, Seq: rec.Seq, Step: d.state.Steps,
				Recorded: "edited the context: " + string(a), New: "edits the context: " + string(b)}
		}
	case loop.Stop:
		if rec.Status != eff.Status {
			diff = &Difference{Aspect: aspectOf(eff.Status, rec.Status), Seq: rec.Seq, Step: d.state.Steps,
				Recorded: "stopped: " + string(rec.Status) + ": " + rec.Detail,
				New:      "stops: " + string(eff.Status) + ": " + eff.Detail}
		}
	}
	if diff != nil {
		d.differ(diff)
		return nil
	}
	d.take()
	return nil
}

// recordedBy lists, for each effect the replay performs, the kinds of
// event that record it.
var recordedBy = map[loop.EffectKind][]loop.EventKind{
	loop.RequestModel:   {loop.ModelResponded, loop.ModelFailed},
	loop.Summarize:      {loop.ContextSummarized},
	loop.CountTokens:    {loop.TokensCounted},
	loop.Compensate:     {loop.Compensated},
	loop.ValidateCalls:  {loop.CallsValidated},
	loop.AuthorizeCalls: {loop.PolicyDecided},
	loop.PlanBatch:      {loop.StagePlanned},
	loop.ExecuteStage:   {loop.StageFinished},
	loop.EditContext:    {loop.ContextEdited},
	loop.Stop:           {loop.Stopped},
}

// recorded is a copy of a recorded event for the new log: numbered and
// stamped again when appended.
func recorded(ev *loop.Event) loop.Event {
	c := *ev
	c.Seq = 0
	return c
}

// prepare makes eff's event without the record's step: decisions anew,
// model turns and stages from wherever the record has them.
func (d *driver) prepare(eff loop.Effect) error {
	s := &d.state
	switch eff.Kind {
	case loop.RequestModel:
		if d.live {
			d.prepared = d.askModel(d.nextRequest())
			return nil
		}
		h := history(s.Messages)
		turns := d.recordedTurns()
		for i := range turns {
			t := &turns[i]
			if t.step == s.Steps+1 && t.history == h {
				d.prepared = recorded(t.ev)
				d.stamp(t.ev.At)
				return nil
			}
		}
		return &gapError{&Gap{Step: s.Steps, Reason: fmt.Sprintf(
			"the new run asks the model for turn %d with a history the recorded run never sent; the model's answer is unknown", s.Steps+1)}}
	case loop.Summarize:
		if d.live {
			r := eff.Summary
			d.prepared = loop.SummaryEvent(d.askModel(&llm.Request{Model: r.Model, Messages: loop.SummaryMessages(s.Messages, r), Step: s.Steps + 1}), r)
			return nil
		}
		return &gapError{&Gap{Step: s.Steps, Reason: "the new run asks the model for a summary the recorded run never asked for; its answer is unknown"}}
	case loop.CountTokens:
		if d.live {
			d.prepared = loop.CountRequest(d.ctx, d.cfg.Model, d.nextRequest())
			return nil
		}
		return &gapError{&Gap{Step: s.Steps, Reason: "the new run asks the provider to count a request the recorded run never counted; the count is unknown"}}
	case loop.Compensate:
		return d.prepareCompensation(eff)
	case loop.ValidateCalls:
		d.prepared = loop.Event{Kind: loop.CallsValidated,
			Checks: loop.CheckCalls(d.cfg.Tools, s.Batch.Calls, s.Budgets.ArgumentLimits(), s.RunID, d.cfg.RequestID)}
	case loop.AuthorizeCalls:
		who := d.identity()
		decisions, err := loop.AuthorizeTainted(d.ctx, d.cfg.Policy, who, d.cfg.Tools, s.Batch.Calls, eff.Calls, s.Batch.Taint)
		if err != nil {
			return fmt.Errorf("replay: asking the policy: %w", err)
		}
		d.prepared = loop.Event{Kind: loop.PolicyDecided, Decisions: decisions}
	case loop.PlanBatch:
		p, err := loop.PlanCalls(d.cfg.Planner, d.cfg.Tools, s.Batch.Calls, eff.Calls, s.Batch.Approved)
		if err != nil {
			return fmt.Errorf("replay: planning: %w", err)
		}
		d.prepared = loop.Event{Kind: loop.StagePlanned, Plan: &p}
	case loop.ExecuteStage:
		return d.prepareStage(eff)
	}
	return nil
}

// nextRequest is the request of the new run's next model turn, as a
// live model is asked it (and counts it).
func (d *driver) nextRequest() *llm.Request {
	s := &d.state
	return &llm.Request{Model: s.Model, Messages: slices.Clip(s.Messages), Tools: d.cfg.Tools.Definitions(),
		Step: s.Steps + 1, CacheKey: loop.CacheKey(s.RunID), Output: s.Output.Format()}
}

// prepareCompensation answers a compensation the new run makes out of
// step with the record: a write whose tool declares no compensation here
// is left, as a driver leaves it without doing anything; the others are
// answered by the recorded run's compensation of the same write by the
// same tool. A compensation is a write, so one never recorded is a gap.
func (d *driver) prepareCompensation(eff loop.Effect) error {
	done := map[string]loop.CompensationOutcome{}
	for i := range d.rec {
		for _, o := range d.rec[i].Compensations {
			done[o.CallID] = o
		}
	}
	for _, c := range eff.Compensations {
		if c.Undo == "" && !c.Unknown {
			continue
		}
		if o, ok := done[c.CallID]; !ok || (o.Call != nil && o.Call.Name != c.Undo) {
			return &gapError{&Gap{Step: d.state.Steps, CallID: c.CallID, Tool: c.Tool, Reason: fmt.Sprintf(
				"the new run undoes call %s (%s) by %s, which the recorded run never did: a compensation is a write, which a replay never runs",
				c.CallID, c.Tool, undoName(c.Undo))}}
		}
	}
	d.prepared = loop.Compensations(eff.Compensations, func(c loop.CompensationCall) loop.CompensationOutcome {
		if c.Undo == "" && !c.Unknown {
			return loop.CompensationOutcome{CallID: c.CallID, State: loop.UndoLeft, Reason: "no compensation is declared for " + c.Tool}
		}
		return done[c.CallID]
	})
	return nil
}

// undoName names a compensating tool for a report.
func undoName(undo string) string {
	if undo == "" {
		return "nothing (no compensation declared)"
	}
	return undo
}

// undoIDs say which writes a Compensate effect undoes, and by which tool.
func undoIDs(cs []loop.CompensationCall) []string {
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.CallID + " by " + undoName(c.Undo)
	}
	return ids
}

// undoneIDs say which writes a compensated event records, and by which
// tool: the recorded compensating call's, or the new effect's where the
// record made no call (a write left without an attempt says nothing
// about the tool that would have undone it).
func undoneIDs(os []loop.CompensationOutcome, eff []loop.CompensationCall) []string {
	ids := make([]string, len(os))
	for i, o := range os {
		undo := ""
		switch {
		case o.Call != nil:
			undo = o.Call.Name
		case strings.HasPrefix(o.Reason, "no compensation is declared"):
		case i < len(eff) && eff[i].CallID == o.CallID:
			undo = eff[i].Undo
		}
		ids[i] = o.CallID + " by " + undoName(undo)
	}
	return ids
}

// identity is who the new run acts for.
func (d *driver) identity() policy.Identity {
	if d.cfg.Identity != nil {
		return *d.cfg.Identity
	}
	return d.rec[0].Start.Identity
}

// prepareStage answers a stage's calls from the recorded outcomes of the
// same calls (by ID, with the same tool and arguments), running a
// read-only tool for real when allowed.
func (d *driver) prepareStage(eff loop.Effect) error {
	s := &d.state
	ev := loop.Event{Kind: loop.StageFinished, Stage: eff.Stage, Outcomes: make([]executor.Outcome, len(eff.Calls))}
	execs := loop.StageCalls(s, eff.Calls, d.cfg.Tools)
	for j, i := range eff.Calls {
		c := s.Batch.Calls[i]
		if rc, ok := d.calls[c.ID]; ok && !d.live && rc.name == c.Name && bytes.Equal(rc.args, canonical(c.Arguments)) {
			ev.Outcomes[j] = rc.outcome
			d.stamp(rc.outcome.Started.Add(rc.outcome.Duration))
			continue
		}
		if rc, ok := d.byArgs[recordedCall{name: c.Name, args: canonical(c.Arguments)}.key()]; ok && d.live {
			// The recorded result, under the new call's ID.
			o := rc.outcome
			o.Result.CallID = c.ID
			ev.Outcomes[j] = o
			continue
		}
		t, _ := d.cfg.Tools.Lookup(c.Name)
		if !d.cfg.LiveTools || t == nil || t.Effect() != tool.ReadOnly {
			why := "its outcome is unknown"
			switch {
			case t != nil && t.Effect() == tool.Write:
				why = "it is a write, which a replay never runs"
			case !d.cfg.LiveTools:
				why += " (live tools, which run read-only tools, are off)"
			}
			what := "which the recorded run never made"
			if d.live {
				what = "with arguments " + string(canonical(c.Arguments)) + ", which no recorded call had"
			}
			return &gapError{&Gap{Step: s.Steps, CallID: c.ID, Tool: c.Name, Reason: fmt.Sprintf(
				"the new run makes call %s (%s) %s: %s", c.ID, c.Name, what, why)}}
		}
		ev.Outcomes[j] = d.cfg.Executor.Run(d.ctx, execs[j])
		d.report.LiveCalls = append(d.report.LiveCalls, c.ID)
	}
	d.prepared = ev
	return nil
}

// liveRetries is how many times a live model's retryable failure is
// tried again.
const liveRetries = 2

// askModel asks the live model for a turn (loop.ModelTurn), retrying what
// the provider says may succeed later, and returns the event that records
// it.
func (d *driver) askModel(req *llm.Request) loop.Event {
	start := time.Now()
	wait := loop.DefaultModelRetryBackoff
	for attempt := 1; ; attempt++ {
		resp, err := loop.ModelTurn(d.ctx, d.cfg.Model, req, loop.TurnOptions{Timeout: loop.DefaultModelTimeout})
		if err == nil {
			return loop.Event{Kind: loop.ModelResponded, At: time.Now(), Latency: time.Since(start), Response: resp, Attempts: attempt}
		}
		f := loop.ContextFailure(d.ctx.Err())
		if f == nil && resp == nil && llm.IsRetryable(err) && attempt <= liveRetries {
			t := time.NewTimer(loop.ModelRetryWait(err, wait))
			wait *= 2
			select {
			case <-d.ctx.Done():
				t.Stop()
				f = loop.ContextFailure(d.ctx.Err())
			case <-t.C:
				continue
			}
		}
		if f == nil {
			f = loop.ModelFailure(attempt, err, resp != nil)
		}
		return loop.Event{Kind: loop.ModelFailed, At: time.Now(), Latency: time.Since(start), Attempts: attempt, Failure: f, Response: resp}
	}
}

// RequestModel implements loop.Driver with the recorded turn.
func (d *driver) RequestModel() loop.Event { return d.prepared }

// CountTokens implements loop.Driver with the recorded count (or, with a
// live model, the model's count).
func (d *driver) CountTokens() loop.Event { return d.prepared }

// Compensate implements loop.Driver with the recorded compensations.
func (d *driver) Compensate([]loop.CompensationCall) loop.Event { return d.prepared }

// Summarize implements loop.Driver with the recorded summary.
func (d *driver) Summarize(*loop.SummaryRequest) loop.Event { return d.prepared }

// ValidateCalls implements loop.Driver with the new checks.
func (d *driver) ValidateCalls() (loop.Event, error) { return d.prepared, nil }

// AuthorizeCalls implements loop.Driver with the new decisions.
func (d *driver) AuthorizeCalls([]int) (loop.Event, error) { return d.prepared, nil }

// PlanBatch implements loop.Driver with the new plan.
func (d *driver) PlanBatch([]int) (loop.Event, error) { return d.prepared, nil }

// ExecuteStage implements loop.Driver with the recorded outcomes.
func (d *driver) ExecuteStage(int, []int) loop.Event { return d.prepared }
