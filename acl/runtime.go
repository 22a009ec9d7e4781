package acl

import (
	"sync"
	"time"
)

// Sizes used throughout the simulator.
const (
	KiB = int64(1) << 10
	MiB = int64(1) << 20
	GiB = int64(1) << 30

	// Granularity is the page size of the VMM calls and of huge-page
	// allocations ("currently only 2M is supported").
	Granularity = 2 * MiB

	// HBMBase is where each device's usable HBM starts in device address
	// space; VABase is the start of the range ReserveMemAddress hands out.
	HBMBase = uint64(0x12c0_0000_0000)
	VABase  = uint64(0x1000_0000_0000)
	vaSize  = HBMBase - VABase // 2.75 TiB of reservable address space
)

// Defaults of DeviceSpec: an Ascend910B3 with 64 GiB HBM of which the
// firmware and system keep 3 GiB, so GetMemInfo reports a total of 61 GiB,
// as torch_npu does on these parts ("60.97 GiB total capacity").
const (
	DefaultDeviceName     = "Ascend910B3"
	DefaultHBMBytes       = 64 * GiB
	DefaultSystemReserved = 3 * GiB
)

// MemAttr selects the memory GetMemInfo reports on (aclrtMemAttr).
type MemAttr int

// aclrtMemAttr values.
const (
	MemDDR          MemAttr = 0
	MemHBM          MemAttr = 1
	MemDDRHuge      MemAttr = 2
	MemDDRNormal    MemAttr = 3
	MemHBMHuge      MemAttr = 4
	MemHBMNormal    MemAttr = 5
	MemDDRP2PHuge   MemAttr = 6
	MemDDRP2PNormal MemAttr = 7
	MemHBMP2PHuge   MemAttr = 8
	MemHBMP2PNormal MemAttr = 9
	MemHBMHuge1G    MemAttr = 10
	MemHBMP2PHuge1G MemAttr = 11
)

// MallocPolicy is aclrtMemMallocPolicy: a page policy, optionally OR-ed with
// a bandwidth or access flag.
type MallocPolicy int

// aclrtMemMallocPolicy values.
const (
	HugeFirst                  MallocPolicy = 0
	HugeOnly                   MallocPolicy = 1
	NormalOnly                 MallocPolicy = 2
	HugeFirstP2P               MallocPolicy = 3
	HugeOnlyP2P                MallocPolicy = 4
	NormalOnlyP2P              MallocPolicy = 5
	Huge1GOnly                 MallocPolicy = 6
	Huge1GOnlyP2P              MallocPolicy = 7
	MemTypeLowBandWidth        MallocPolicy = 0x100
	MemTypeHighBandWidth       MallocPolicy = 0x1000
	MemAccessUserSpaceReadonly MallocPolicy = 0x100000
)

// DeviceSpec describes one simulated device.
type DeviceSpec struct {
	Name           string // "Ascend910B3"
	HBMBytes       int64  // physical HBM, default 64 GiB
	SystemReserved int64  // taken by firmware/system: 0 = default 3 GiB, negative = none
}

// Config configures a Runtime. Zero values take the defaults.
type Config struct {
	Devices []DeviceSpec // default: one Ascend910B3
	Clock   Clock        // default RealClock()
}

// Runtime is one simulated host: a set of devices sharing a clock.
type Runtime struct {
	clock   Clock
	devices []*Device

	mu      sync.Mutex
	current int
}

// NewRuntime builds the devices of cfg. Zero fields of a DeviceSpec take the
// defaults; a SystemReserved not below HBMBytes leaves a device with one
// granule of usable memory rather than none.
func NewRuntime(cfg Config) *Runtime {
	r := &Runtime{clock: cfg.Clock}
	if r.clock == nil {
		r.clock = RealClock()
	}
	specs := cfg.Devices
	if len(specs) == 0 {
		specs = []DeviceSpec{{}}
	}
	for i, s := range specs {
		if s.Name == "" {
			s.Name = DefaultDeviceName
		}
		if s.HBMBytes <= 0 {
			s.HBMBytes = DefaultHBMBytes
		}
		if s.SystemReserved == 0 {
			s.SystemReserved = DefaultSystemReserved
		}
		if s.SystemReserved < 0 {
			s.SystemReserved = 0
		}
		r.devices = append(r.devices, newDevice(i, s, r.clock))
	}
	return r
}

// GetDeviceCount returns the number of devices (aclrtGetDeviceCount).
func (r *Runtime) GetDeviceCount() int { return len(r.devices) }

// SetDevice makes id the current device (aclrtSetDevice).
func (r *Runtime) SetDevice(id int) error {
	if id < 0 || id >= len(r.devices) {
		return newErr(CodeRTInvalidDeviceID, "aclrtSetDevice", "device %d out of range [0, %d)", id, len(r.devices))
	}
	r.mu.Lock()
	r.current = id
	r.mu.Unlock()
	return nil
}

// GetDevice returns the current device id (aclrtGetDevice); 0 until
// SetDevice is called.
func (r *Runtime) GetDevice() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current
}

// Device returns device id, or ErrInvalidDevice when out of range.
func (r *Runtime) Device(id int) (*Device, error) {
	if id < 0 || id >= len(r.devices) {
		return nil, newErr(CodeRTInvalidDeviceID, "Device", "device %d out of range [0, %d)", id, len(r.devices))
	}
	return r.devices[id], nil
}

// Current returns the current device (see SetDevice).
func (r *Runtime) Current() *Device { return r.devices[r.GetDevice()] }

// Clock returns the runtime's clock.
func (r *Runtime) Clock() Clock { return r.clock }

// Device is one simulated NPU. All methods are safe for concurrent use.
type Device struct {
	id    int
	spec  DeviceSpec
	clock Clock

	mu     sync.Mutex
	usable int64   // HBM bytes after the system reservation
	limit  int64   // SetHBMLimit cap; 0 = none
	used   int64   // footprint of live Malloc + MallocPhysical
	hbm    freeMap // free ranges of [HBMBase, HBMBase+usable)
	allocs map[uint64]allocation

	failNth int // countdown of FailNthMalloc; 0 = off

	streams    map[Stream]*stream
	busyUntil  time.Time // completion of the last work on any stream
	events     map[Event]*event
	nextStream uint64
	nextEvent  uint64

	va         freeMap // free reservable address space
	reserves   map[uint64]*reservation
	phys       map[PhysHandle]*physical
	nextHandle uint64
}

// DeviceInfo is a snapshot of a device's state for display.
type DeviceInfo struct {
	ID       int
	Name     string
	HBMTotal int64 // usable bytes GetMemInfo reports as total
	HBMUsed  int64 // bytes taken by Malloc + MallocPhysical (incl. padding and page rounding)
	Streams  int   // live streams created with CreateStream
}

func newDevice(id int, s DeviceSpec, clock Clock) *Device {
	usable := s.HBMBytes - s.SystemReserved
	if usable < Granularity {
		usable = Granularity
	}
	usable -= usable % Granularity
	// Handles look like host pointers and differ between devices.
	hbase := uint64(0x5570_0000_0000) + uint64(id)<<32
	return &Device{
		id:         id,
		spec:       s,
		clock:      clock,
		usable:     usable,
		hbm:        newFreeMap(HBMBase, uint64(usable)),
		allocs:     make(map[uint64]allocation),
		streams:    make(map[Stream]*stream),
		events:     make(map[Event]*event),
		nextStream: hbase + 0x1000_0000,
		nextEvent:  hbase + 0x2000_0000,
		nextHandle: hbase + 0x3000_0000,
		va:         newFreeMap(VABase, vaSize),
		reserves:   make(map[uint64]*reservation),
		phys:       make(map[PhysHandle]*physical),
	}
}

// ID returns the device id.
func (d *Device) ID() int { return d.id }

// Spec returns the device description, defaults filled in.
func (d *Device) Spec() DeviceSpec { return d.spec }

// total is the capacity reported as total: usable HBM, or the cap.
func (d *Device) total() int64 {
	if d.limit > 0 && d.limit < d.usable {
		return d.limit
	}
	return d.usable
}

// Info returns a snapshot of the device.
func (d *Device) Info() DeviceInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(d.streams)
	if _, ok := d.streams[DefaultStream]; ok {
		n-- // the default stream is not a created stream
	}
	return DeviceInfo{ID: d.id, Name: d.spec.Name, HBMTotal: d.total(), HBMUsed: d.used, Streams: n}
}

// GetMemInfo returns free and total bytes of attr (aclrtGetMemInfo). All HBM
// attributes report the device's HBM; the simulated parts have no DDR, so
// DDR attributes report 0, 0. Free is total minus used, not the largest
// range: a fragmented device can report free memory that Malloc cannot get.
func (d *Device) GetMemInfo(attr MemAttr) (free, total int64, err error) {
	switch attr {
	case MemDDR, MemDDRHuge, MemDDRNormal, MemDDRP2PHuge, MemDDRP2PNormal:
		return 0, 0, nil
	case MemHBM, MemHBMHuge, MemHBMNormal, MemHBMP2PHuge, MemHBMP2PNormal, MemHBMHuge1G, MemHBMP2PHuge1G:
	default:
		return 0, 0, newErr(CodeRTParamInvalid, "aclrtGetMemInfo", "unknown memory attribute %d", attr)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	total = d.total()
	return max(total-d.used, 0), total, nil
}

// LargestFreeRange returns the size of the largest contiguous free range of
// HBM: the biggest normal-page Malloc footprint that could still succeed
// (ignoring the SetHBMLimit cap).
func (d *Device) LargestFreeRange() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return int64(d.hbm.largest())
}

// now reads the clock; a helper so callers read time once per operation.
func (d *Device) now() time.Time { return d.clock.Now() }
