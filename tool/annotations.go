package tool

// Annotations are the behaviour hints an MCP server attaches to a tool
// (readOnlyHint, destructiveHint, idempotentHint, openWorldHint). A nil
// hint is one the server did not give.
type Annotations struct {
	ReadOnlyHint    *bool
	DestructiveHint *bool
	IdempotentHint  *bool
	OpenWorldHint   *bool
}

// ApplyTo sets the definition's effect and risk from the hints, assuming the
// worst where a hint is missing, as the MCP specification asks: a tool is
// read-only only if it says so; a tool that writes is destructive unless it
// says it is not. A destructive write is high risk; a non-destructive one
// that is idempotent is low risk; any other write is medium. A read that
// reaches the open world (the web, other systems) is medium risk. A tool
// that reaches the open world, or does not say that it does not, sends
// data out (Trust.Outward).
func (a Annotations) ApplyTo(def *Definition) {
	is := func(p *bool, missing bool) bool {
		if p == nil {
			return missing
		}
		return *p
	}
	def.Trust.Outward = is(a.OpenWorldHint, true)
	if is(a.ReadOnlyHint, false) {
		def.Effect = ReadOnly
		def.Risk = RiskLow
		if is(a.OpenWorldHint, true) {
			def.Risk = RiskMedium
		}
		return
	}
	def.Effect = Write
	switch {
	case is(a.DestructiveHint, true):
		def.Risk = RiskHigh
	case is(a.IdempotentHint, false):
		def.Risk = RiskLow
	default:
		def.Risk = RiskMedium
	}
}
