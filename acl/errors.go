package acl

import "fmt"

// Error is an ACL runtime error: the numeric aclError code, the API that
// returned it and a human message.
type Error struct {
	Code int    // e.g. 207001
	API  string // e.g. "aclrtMalloc"
	Msg  string // human text
}

// Error formats as "aclrtMalloc: ACL_ERROR_RT_MEMORY_ALLOCATION (207001): msg".
func (e *Error) Error() string {
	s := fmt.Sprintf("%s (%d)", CodeName(e.Code), e.Code)
	if e.API != "" {
		s = e.API + ": " + s
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// Is reports whether target is an *Error with the same code, so the
// sentinels below work with errors.Is.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// ACL runtime error codes (rt_error_codes.h / acl_base.h).
const (
	CodeSuccess               = 0
	CodeInvalidParam          = 100000 // ACL_ERROR_INVALID_PARAM
	CodeRTParamInvalid        = 107000
	CodeRTInvalidDeviceID     = 107001
	CodeRTContextNull         = 107002
	CodeRTStreamContext       = 107003
	CodeRTAddrUnaligned       = 107008
	CodeRTInvalidMemoryType   = 107016
	CodeRTInvalidHandle       = 107017
	CodeRTInvalidMallocType   = 107018
	CodeRTWaitTimeout         = 107019
	CodeRTFeatureNotSupport   = 207000
	CodeRTMemoryAllocation    = 207001
	CodeRTMemoryFree          = 207002
	CodeRTNoDevice            = 207004
	CodeRTResourceAllocFail   = 207005
	CodeRTNoEventResource     = 207007
	CodeRTNoStreamResource    = 207008
	CodeRTDeviceOOM           = 207018
	CodeRTInternalError       = 507000
	CodeRTStreamNotComplete   = 507004
	CodeRTEventNotComplete    = 507006
	CodeRTStreamSyncTimeout   = 507046
	CodeRTEventSyncTimeout    = 507047
	CodeRTDrvInternalError    = 507899
	CodeBadAlloc              = 200000
	CodeAPINotSupport         = 200001
	CodeInvalidDevice         = 200002
	CodeMemoryAddrUnaligned   = 200003
	CodeInvalidResourceHandle = 200005
)

var codeNames = map[int]string{
	CodeSuccess:               "ACL_SUCCESS",
	CodeInvalidParam:          "ACL_ERROR_INVALID_PARAM",
	100001:                    "ACL_ERROR_UNINITIALIZE",
	100002:                    "ACL_ERROR_REPEAT_INITIALIZE",
	CodeBadAlloc:              "ACL_ERROR_BAD_ALLOC",
	CodeAPINotSupport:         "ACL_ERROR_API_NOT_SUPPORT",
	CodeInvalidDevice:         "ACL_ERROR_INVALID_DEVICE",
	CodeMemoryAddrUnaligned:   "ACL_ERROR_MEMORY_ADDRESS_UNALIGNED",
	CodeInvalidResourceHandle: "ACL_ERROR_INVALID_RESOURCE_HANDLE",
	300000:                    "ACL_ERROR_STORAGE_OVER_LIMIT",
	500000:                    "ACL_ERROR_INTERNAL_ERROR",
	500001:                    "ACL_ERROR_FAILURE",
	500003:                    "ACL_ERROR_RT_FAILURE",
	500004:                    "ACL_ERROR_DRV_FAILURE",
	CodeRTParamInvalid:        "ACL_ERROR_RT_PARAM_INVALID",
	CodeRTInvalidDeviceID:     "ACL_ERROR_RT_INVALID_DEVICEID",
	CodeRTContextNull:         "ACL_ERROR_RT_CONTEXT_NULL",
	CodeRTStreamContext:       "ACL_ERROR_RT_STREAM_CONTEXT",
	CodeRTAddrUnaligned:       "ACL_ERROR_RT_ADDR_UNALIGNED",
	CodeRTInvalidMemoryType:   "ACL_ERROR_RT_INVALID_MEMORY_TYPE",
	CodeRTInvalidHandle:       "ACL_ERROR_RT_INVALID_HANDLE",
	CodeRTInvalidMallocType:   "ACL_ERROR_RT_INVALID_MALLOC_TYPE",
	CodeRTWaitTimeout:         "ACL_ERROR_RT_WAIT_TIMEOUT",
	CodeRTFeatureNotSupport:   "ACL_ERROR_RT_FEATURE_NOT_SUPPORT",
	CodeRTMemoryAllocation:    "ACL_ERROR_RT_MEMORY_ALLOCATION",
	CodeRTMemoryFree:          "ACL_ERROR_RT_MEMORY_FREE",
	CodeRTNoDevice:            "ACL_ERROR_RT_NO_DEVICE",
	CodeRTResourceAllocFail:   "ACL_ERROR_RT_RESOURCE_ALLOC_FAIL",
	CodeRTNoEventResource:     "ACL_ERROR_RT_NO_EVENT_RESOURCE",
	CodeRTNoStreamResource:    "ACL_ERROR_RT_NO_STREAM_RESOURCE",
	CodeRTDeviceOOM:           "ACL_ERROR_RT_DEVICE_OOM",
	CodeRTInternalError:       "ACL_ERROR_RT_INTERNAL_ERROR",
	CodeRTStreamNotComplete:   "ACL_ERROR_RT_STREAM_NOT_COMPLETE",
	CodeRTEventNotComplete:    "ACL_ERROR_RT_EVENT_NOT_COMPLETE",
	CodeRTStreamSyncTimeout:   "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT",
	CodeRTEventSyncTimeout:    "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT",
	CodeRTDrvInternalError:    "ACL_ERROR_RT_DRV_INTERNAL_ERROR",
}

// CodeName returns the ACL macro name of code, e.g.
// "ACL_ERROR_RT_MEMORY_ALLOCATION", or "ACL_ERROR_UNKNOWN" for codes the
// simulator does not know.
func CodeName(code int) string {
	if n, ok := codeNames[code]; ok {
		return n
	}
	return "ACL_ERROR_UNKNOWN"
}

// Sentinels for errors.Is; they carry only the code.
var (
	ErrParamInvalid      = &Error{Code: CodeRTParamInvalid}
	ErrInvalidDevice     = &Error{Code: CodeRTInvalidDeviceID}
	ErrAddrUnaligned     = &Error{Code: CodeRTAddrUnaligned}
	ErrInvalidHandle     = &Error{Code: CodeRTInvalidHandle}
	ErrFeatureNotSupport = &Error{Code: CodeRTFeatureNotSupport}
	ErrMemoryAllocation  = &Error{Code: CodeRTMemoryAllocation}
)

func newErr(code int, api, format string, args ...any) error {
	return &Error{Code: code, API: api, Msg: fmt.Sprintf(format, args...)}
}
