// Package config holds the caching allocator's settings: parsing
// PYTORCH_NPU_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF the way torch_npu and
// PyTorch do, the size rules that follow from them (round_size, the segment
// size of a request, the expandable page size) and the conversion from and
// to a snapshot's allocator_settings. Readers of recorded traces use it to
// round sizes as the allocator did, without importing the allocator.
package config
