package tool

// jsonCursor is a place in a JSON document, for the readers that go
// through a call's arguments in one pass: argsParser, which builds their
// value, and fastWalk, which validates and fingerprints them.
type jsonCursor struct {
	b []byte
	i int
}

// space skips JSON white space.
func (c *jsonCursor) space() {
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// after reads what follows a member or an element: the container's
// closing byte (end) or a comma; ok is false for anything else.
func (c *jsonCursor) after(closing byte) (end, ok bool) {
	c.space()
	if c.i >= len(c.b) {
		return false, false
	}
	switch c.b[c.i] {
	case closing:
		c.i++
		return true, true
	case ',':
		c.i++
		return false, true
	}
	return false, false
}
