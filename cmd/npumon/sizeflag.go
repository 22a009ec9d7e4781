package main

import (
	"fmt"

	"github.com/npumon/npumon/allocator/bytesize"
)

// sizeFlag is a byte-count flag (512MiB, 8GiB, a plain number).
type sizeFlag int64

func (s *sizeFlag) String() string { return bytesize.Torch(int64(*s)) }
func (s *sizeFlag) Type() string   { return "size" }
func (s *sizeFlag) Set(v string) error {
	n, err := bytesize.Parse(v)
	if err != nil {
		return err
	}
	if n <= 0 {
		return fmt.Errorf("size must be positive, got %q", v)
	}
	*s = sizeFlag(n)
	return nil
}
