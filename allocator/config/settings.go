package config

import (
	"math/bits"

	"github.com/npumon/npumon/allocator/snapshot"
)

// ConfigFromSettings is the configuration a snapshot's allocator_settings
// describe, on top of the flavour's defaults (st may be nil: the defaults).
func ConfigFromSettings(st *snapshot.Settings, f Flavour) Config {
	cfg := DefaultConfig(f)
	if st == nil {
		return cfg
	}
	cfg.Raw = st.Conf
	if st.MaxSplitSize >= 0 {
		cfg.MaxSplitSize = st.MaxSplitSize
	}
	cfg.GCThreshold = st.GarbageCollectionThreshold
	cfg.ExpandableSegments = st.ExpandableSegments
	for mib, div := range st.RoundupPower2Divisions {
		if mib > 0 {
			cfg.RoundupDivisions[min(bits.Len64(uint64(mib))-1, len(cfg.RoundupDivisions)-1)] = div
		}
	}
	return cfg
}
