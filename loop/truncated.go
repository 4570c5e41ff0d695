package loop

// TruncatedDetail ends the detail of a final answer the model cut off at
// its output token limit (llm.Response.Truncated): the run succeeded, but
// its answer is incomplete, and whoever reads it must know.
const TruncatedDetail = "answer truncated: the model hit its output token limit"

// Truncated reports whether the run's final answer was cut off at the
// model's output token limit. It reads the log, not the detail, so a
// replayed or stored run answers the same.
func (r *Result) Truncated() bool {
	if r.Status != FinalAnswer {
		return false
	}
	for i := len(r.Events) - 1; i >= 0; i-- {
		if ev := &r.Events[i]; ev.Kind == ModelResponded && ev.Response != nil {
			return ev.Response.Truncated
		}
	}
	return false
}
