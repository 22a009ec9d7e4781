package config

import (
	"strings"
	"testing"
)

// TestEnvConf: PYTORCH_ALLOC_CONF is an alias of PYTORCH_NPU_ALLOC_CONF, and
// setting both is an error, as in torch_npu 26.x.
func TestEnvConf(t *testing.T) {
	for _, tc := range []struct {
		name      string
		env       map[string]string
		conf, key string
		err       string
	}{
		{"neither", nil, "", "", ""},
		{"npu", map[string]string{EnvNPUAllocConf: "expandable_segments:True"}, "expandable_segments:True", EnvNPUAllocConf, ""},
		{"alias", map[string]string{EnvAllocConf: "max_split_size_mb:64"}, "max_split_size_mb:64", EnvAllocConf, ""},
		{"both", map[string]string{EnvNPUAllocConf: "a", EnvAllocConf: "b"}, "", "", "both PYTORCH_NPU_ALLOC_CONF and PYTORCH_ALLOC_CONF have been set"},
		{"both, one empty", map[string]string{EnvNPUAllocConf: "", EnvAllocConf: "b"}, "", "", "please set only one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf, key, err := EnvConf(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || conf != tc.conf || key != tc.key {
				t.Errorf("got %q from %q (%v), want %q from %q", conf, key, err, tc.conf, tc.key)
			}
		})
	}
}
