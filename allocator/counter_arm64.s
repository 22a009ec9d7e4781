#include "textflag.h"

// func cycleCounter() int64
TEXT ·cycleCounter(SB), NOSPLIT, $0-8
	MRS  CNTVCT_EL0, R0
	MOVD R0, ret+0(FP)
	RET
