package config

import "fmt"

// Environment variables torch_npu reads its allocator configuration from.
// torch_npu 26.x accepts PyTorch's device-neutral PYTORCH_ALLOC_CONF as an
// alias of PYTORCH_NPU_ALLOC_CONF and refuses to start when both are set.
const (
	EnvNPUAllocConf = "PYTORCH_NPU_ALLOC_CONF"
	EnvAllocConf    = "PYTORCH_ALLOC_CONF"
)

// EnvConf returns the allocator configuration string the environment
// gives torch_npu and the variable it came from ("" when neither is set),
// or an error, in torch_npu's words, when both are set.
func EnvConf(lookup func(string) (string, bool)) (conf, key string, err error) {
	npu, hasNPU := lookup(EnvNPUAllocConf)
	generic, hasGeneric := lookup(EnvAllocConf)
	switch {
	case hasNPU && hasGeneric:
		return "", "", fmt.Errorf("both %s and %s have been set, please set only one of them", EnvNPUAllocConf, EnvAllocConf)
	case hasNPU:
		return npu, EnvNPUAllocConf, nil
	case hasGeneric:
		return generic, EnvAllocConf, nil
	}
	return "", "", nil
}
