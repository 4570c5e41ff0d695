package loop

// Driver is how one driver performs the decider's effects: Drive asks the
// decider for the next effect, has the Driver perform it and append the
// event that records it, and stops when the run is over. An
// implementation says only how I/O happens: the in-process Runner calls
// the effect handlers (ModelTurn, CheckCalls, Authorize, PlanCalls,
// StageCalls) on the goroutine that drives the run; the Temporal workflow
// schedules activities that call them on a worker.
//
// Each method that performs an effect returns the event that records it;
// an error means the run can no longer be driven (a store that failed, a
// workflow's local activity that failed for good), and ends Drive.
type Driver interface {
	// Append numbers and stamps ev, appends it to the run's log and hands
	// it to the decider (Next); it returns the effect the decider calls
	// for next.
	Append(ev Event) Effect
	// Commit is called before eff is performed, for what a driver does
	// between effects: the Runner stores the log before a stage acts on
	// the world; a workflow continues as new before a model turn. An
	// error ends Drive with it.
	Commit(eff Effect) error
	// Interruption returns the failure that stops the run before eff (a
	// caller that canceled, a deadline that passed), or nil.
	Interruption(eff Effect) *Failure
	// RequestModel performs a RequestModel effect.
	RequestModel() Event
	// ValidateCalls performs a ValidateCalls effect.
	ValidateCalls() (Event, error)
	// AuthorizeCalls performs an AuthorizeCalls effect for the batch's
	// calls listed in idx.
	AuthorizeCalls(idx []int) (Event, error)
	// PlanBatch performs a PlanBatch effect for the calls listed in idx.
	PlanBatch(idx []int) (Event, error)
	// ExecuteStage performs an ExecuteStage effect: stage, whose calls are
	// listed in idx.
	ExecuteStage(stage int, idx []int) Event
	// Summarize performs a Summarize effect: a model request for the
	// summary r describes (SummaryMessages), recorded by SummaryEvent.
	Summarize(r *SummaryRequest) Event
	// CountTokens performs a CountTokens effect: the provider's count of
	// the request RequestModel would send now (CountRequest), recorded
	// as a tokens_counted event; a count that fails is recorded too.
	CountTokens() Event

	// Compensate performs a Compensate effect: the compensations in
	// order (Compensations with PerformCompensation), also when the run's
	// context has ended, since a canceled or late run still undoes its
	// writes.
	Compensate(calls []CompensationCall) Event
	// Idle is called when the run has nothing left to do (effect None).
	// A driver that waits for the answers to a paused run returns the
	// event to go on with (Resumed) and true once they came; false ends
	// Drive.
	Idle() (Event, bool, error)
}

// Drive performs eff and every effect the decider asks for after it,
// through d, until the run is over (d.Idle returns false) or d fails. It
// is the one loop of every driver.
func Drive(d Driver, eff Effect) error {
	for {
		if eff.Kind == None {
			ev, more, err := d.Idle()
			if err != nil || !more {
				return err
			}
			eff = d.Append(ev)
			continue
		}
		if err := d.Commit(eff); err != nil {
			return err
		}
		if eff.Kind != Stop && eff.Kind != Compensate {
			// A compensation is how a run that is being interrupted
			// leaves the world: it is not interrupted itself.
			if f := d.Interruption(eff); f != nil {
				eff = d.Append(Event{Kind: Interrupted, Failure: f})
				continue
			}
		}
		ev, err := perform(d, eff)
		if err != nil {
			return err
		}
		eff = d.Append(ev)
	}
}

// perform has d do what eff asks and returns the event that records it.
func perform(d Driver, eff Effect) (Event, error) {
	switch eff.Kind {
	case RequestModel:
		return d.RequestModel(), nil
	case ValidateCalls:
		return d.ValidateCalls()
	case AuthorizeCalls:
		return d.AuthorizeCalls(eff.Calls)
	case PlanBatch:
		return d.PlanBatch(eff.Calls)
	case ExecuteStage:
		return d.ExecuteStage(eff.Stage, eff.Calls), nil
	case Summarize:
		return d.Summarize(eff.Summary), nil
	case CountTokens:
		return d.CountTokens(), nil

	case Compensate:
		return d.Compensate(eff.Compensations), nil
	case EditContext:
		// The decider made the edit: the driver records it.
		return Event{Kind: ContextEdited, Edit: eff.Edit}, nil
	case Stop:
		// The decider said stop on the event before: the run stops now.
		return Event{Kind: Stopped, Status: eff.Status, Detail: eff.Detail}, nil
	}
	return driverError("unknown effect " + string(eff.Kind)), nil
}

// driverError is the event of a driver that cannot do what the decider
// asked: the run stops with model_error, saying so.
func driverError(msg string) Event {
	return Event{Kind: Interrupted, Failure: &Failure{Kind: FailModel, Message: "driver error: " + msg}}
}
