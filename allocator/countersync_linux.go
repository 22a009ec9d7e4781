package allocator

import (
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/npumon/npumon/internal/crash"
)

// counterAgreesAcrossCPUs runs counterInSync over every CPU this process
// may run on, on a thread of its own.
func counterAgreesAcrossCPUs(read func() int64) bool {
	var allowed unix.CPUSet
	if unix.SchedGetaffinity(0, &allowed) != nil {
		return false
	}
	var cpus []int
	for c := range len(allowed) * 64 {
		if allowed.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	res := make(chan bool, 1)
	go func() {
		defer crash.Recover()
		// Never unlocked: the thread, left pinned to one CPU, exits with
		// this goroutine instead of going back to the scheduler.
		runtime.LockOSThread()
		res <- counterInSync(read, cpus, func(cpu int) error {
			var one unix.CPUSet
			one.Set(cpu)
			return unix.SchedSetaffinity(0, &one)
		})
	}()
	return <-res
}
