//go:build !unix

package align_test

import "testing"

// reportCPU reports nothing where getrusage is missing.
func reportCPU(*testing.B) func() { return func() {} }
