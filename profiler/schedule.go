package profiler

// ProfilerAction is what the schedule asks for at a step
// (docs/reference/profiler-format.md §8.1).
type ProfilerAction int8

const (
	ActionNone          ProfilerAction = 0
	ActionWarmup        ProfilerAction = 1
	ActionRecord        ProfilerAction = 2
	ActionRecordAndSave ProfilerAction = 3
	// actionStopped stands for "profiler stopped" (torch's None) in transitions.
	actionStopped ProfilerAction = -1
)

func (a ProfilerAction) String() string {
	switch a {
	case ActionNone:
		return "NONE"
	case ActionWarmup:
		return "WARMUP"
	case ActionRecord:
		return "RECORD"
	case ActionRecordAndSave:
		return "RECORD_AND_SAVE"
	}
	return "None"
}

// Schedule is torch_npu.profiler.schedule(wait, active, warmup, repeat,
// skip_first, skip_first_wait).
type Schedule struct {
	Wait, Active, Warmup, Repeat, SkipFirst, SkipFirstWait int
}

// normalized applies torch_npu's fix-ups: negatives → 0, active ≤ 0 → 1.
func (s Schedule) normalized() Schedule {
	for _, p := range []*int{&s.Wait, &s.Active, &s.Warmup, &s.Repeat, &s.SkipFirst, &s.SkipFirstWait} {
		if *p < 0 {
			*p = 0
		}
	}
	if s.Active <= 0 {
		s.Active = 1
	}
	return s
}

// Action returns the action for step (docs/reference/profiler-format.md §8.1).
func (s Schedule) Action(step int) ProfilerAction {
	s = s.normalized()
	if step < s.SkipFirst {
		return ActionNone
	}
	st := step - s.SkipFirst
	if s.SkipFirstWait != 0 {
		st += s.Wait
	}
	n := s.Wait + s.Warmup + s.Active
	if s.Repeat > 0 && st/n >= s.Repeat {
		return ActionNone
	}
	switch m := st % n; {
	case m < s.Wait:
		return ActionNone
	case m < s.Wait+s.Warmup:
		return ActionWarmup
	case m < n-1:
		return ActionRecord
	default:
		return ActionRecordAndSave
	}
}

// ctl is one step of the action controller.
type ctl uint8

const (
	ctlWarn ctl = iota
	ctlInit
	ctlWarmup
	ctlStart
	ctlStop
	ctlFinalize
	ctlTraceReady
	ctlDeleteDir
)

var ctlNames = [...]string{"warn", "init", "warmup", "start", "stop", "finalize", "trace_ready", "delete_dir"}

func (c ctl) String() string { return ctlNames[c] }

// transitions is torch_npu's action table
// (docs/reference/profiler-format.md §8.2): [prev][cur], where cur index 4 is
// "stopped". prev is never "stopped".
var transitions = [4][5][]ctl{
	ActionNone: {
		ActionNone:          nil,
		ActionWarmup:        {ctlInit, ctlWarmup},
		ActionRecord:        {ctlInit, ctlStart},
		ActionRecordAndSave: {ctlInit, ctlStart},
		4:                   nil,
	},
	ActionWarmup: {
		ActionNone:          {ctlWarn, ctlStart, ctlStop, ctlFinalize},
		ActionWarmup:        nil,
		ActionRecord:        {ctlStart},
		ActionRecordAndSave: {ctlStart},
		4:                   {ctlWarn, ctlFinalize, ctlDeleteDir},
	},
	ActionRecord: {
		ActionNone:          {ctlWarn, ctlStop, ctlFinalize},
		ActionWarmup:        {ctlWarn, ctlStop, ctlFinalize},
		ActionRecord:        nil,
		ActionRecordAndSave: nil,
		4:                   {ctlWarn, ctlStop, ctlFinalize, ctlTraceReady},
	},
	ActionRecordAndSave: {
		ActionNone:          {ctlStop, ctlFinalize, ctlTraceReady},
		ActionWarmup:        {ctlStop, ctlFinalize, ctlTraceReady, ctlInit, ctlWarmup},
		ActionRecord:        {ctlStop, ctlFinalize, ctlTraceReady, ctlInit, ctlStart},
		ActionRecordAndSave: {ctlStop, ctlFinalize, ctlTraceReady, ctlInit, ctlStart},
		4:                   {ctlWarn, ctlStop, ctlFinalize, ctlTraceReady},
	},
}

func transition(prev, cur ProfilerAction) []ctl {
	c := int(cur)
	if cur == actionStopped {
		c = 4
	}
	return transitions[prev][c]
}
