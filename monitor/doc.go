// Package monitor groups what watches device memory as it changes; its
// code is in sub-packages, each one responsibility:
//
//   - store: the time-indexed Store every view queries, its query types and
//     the segment map at a cursor;
//   - wire: the live protocol (Server, Client, frames, socket addresses);
//   - attach: an in-process allocator feeding a Store or a Server;
//   - watch: files and directories (the one load path for a capture, the
//     directory watcher and source, a job directory, profiler ingest);
//   - classify: what an input path is, by its content, and a job
//     directory's newest snapshot and profiler runs;
//   - align: time recovery, a snapshot trace without times aligned to the
//     profiler runs of its process;
//   - workload: the demo training job that produces what the others read;
//   - metrics, ranks, npusmi, devpoll, producer: Prometheus export,
//     multi-rank jobs, npu-smi, device polling and the Python producer.
package monitor
