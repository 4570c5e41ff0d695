package sized

// New returns a new H and room for n values of E. For one to four values
// both come in one allocation, which lives as long as either is reachable.
func New[H, E any](n int) (*H, []E) {
	switch n {
	case 1:
		x := new(struct {
			h H
			e [1]E
		})
		return &x.h, x.e[:]
	case 2:
		x := new(struct {
			h H
			e [2]E
		})
		return &x.h, x.e[:]
	case 3:
		x := new(struct {
			h H
			e [3]E
		})
		return &x.h, x.e[:]
	case 4:
		x := new(struct {
			h H
			e [4]E
		})
		return &x.h, x.e[:]
	}
	return new(H), make([]E, n)
}

// New2 is New with room for n values of each of E and F.
func New2[H, E, F any](n int) (*H, []E, []F) {
	switch n {
	case 1:
		x := new(struct {
			h H
			e [1]E
			f [1]F
		})
		return &x.h, x.e[:], x.f[:]
	case 2:
		x := new(struct {
			h H
			e [2]E
			f [2]F
		})
		return &x.h, x.e[:], x.f[:]
	case 3:
		x := new(struct {
			h H
			e [3]E
			f [3]F
		})
		return &x.h, x.e[:], x.f[:]
	case 4:
		x := new(struct {
			h H
			e [4]E
			f [4]F
		})
		return &x.h, x.e[:], x.f[:]
	}
	return new(H), make([]E, n), make([]F, n)
}
