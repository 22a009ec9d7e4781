package acl

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorFormat(t *testing.T) {
	err := &Error{Code: 207001, API: "aclrtMalloc", Msg: "no range fits"}
	want := "aclrtMalloc: ACL_ERROR_RT_MEMORY_ALLOCATION (207001): no range fits"
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if got := ErrParamInvalid.Error(); got != "ACL_ERROR_RT_PARAM_INVALID (107000)" {
		t.Errorf("sentinel Error() = %q", got)
	}
}

func TestErrorIsAs(t *testing.T) {
	err := fmt.Errorf("segment alloc: %w", newErr(CodeRTMemoryAllocation, "aclrtMalloc", "x"))
	if !errors.Is(err, ErrMemoryAllocation) {
		t.Error("wrapped 207001 is not ErrMemoryAllocation")
	}
	if errors.Is(err, ErrParamInvalid) {
		t.Error("207001 matched ErrParamInvalid")
	}
	if errors.Is(err, errors.New("ACL_ERROR_RT_MEMORY_ALLOCATION")) {
		t.Error("matched a non-*Error target")
	}
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != 207001 || ae.API != "aclrtMalloc" || ae.Msg != "x" {
		t.Errorf("As = %#v", ae)
	}
}

func TestSentinelCodes(t *testing.T) {
	for _, c := range []struct {
		err  *Error
		code int
		name string
	}{
		{ErrMemoryAllocation, 207001, "ACL_ERROR_RT_MEMORY_ALLOCATION"},
		{ErrParamInvalid, 107000, "ACL_ERROR_RT_PARAM_INVALID"},
		{ErrInvalidDevice, 107001, "ACL_ERROR_RT_INVALID_DEVICEID"},
		{ErrInvalidHandle, 107017, "ACL_ERROR_RT_INVALID_HANDLE"},
		{ErrAddrUnaligned, 107008, "ACL_ERROR_RT_ADDR_UNALIGNED"},
		{ErrFeatureNotSupport, 207000, "ACL_ERROR_RT_FEATURE_NOT_SUPPORT"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.err.Code != c.code || CodeName(c.code) != c.name || c.err.API != "" || c.err.Msg != "" {
				t.Errorf("sentinel %v: code %d name %q", c.err, c.err.Code, CodeName(c.code))
			}
		})
	}
	if CodeName(0) != "ACL_SUCCESS" || CodeName(507899) != "ACL_ERROR_RT_DRV_INTERNAL_ERROR" {
		t.Error("CodeName of 0 or 507899 wrong")
	}
	if CodeName(123) != "ACL_ERROR_UNKNOWN" {
		t.Errorf("CodeName(123) = %q", CodeName(123))
	}
}
