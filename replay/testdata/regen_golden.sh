#!/bin/sh
# Regenerate the golden stats with the Python reference (ref_stats.py).
# Run from replay/testdata after gen_snapshots.py.
set -e
python3 gen_explain.py .
python3 gen_steps.py .
python3 gen_forward.py .
F=../../testdata/fixtures/snapshots
mkdir -p golden
for f in $F/*.pickle cuda21_p2.pickle cuda21_p3.pickle cuda21_p4.pickle cuda21_p5.pickle cuda21.json \
         npu_workspace.pickle torch113_list.pickle torch113_list.json wide_addr.pickle leak_steps.pickle \
         flavour_cuda21_sidestream.pickle flavour_cuda21_sideonly.pickle flavour_npu_frames.pickle flavour_npu_streams.pickle \
         forward_frames.pickle; do
  python3 ref_stats.py "$f" > "golden/$(basename "$f").stats.json"
done
python3 ref_stats.py $F/cuda-2026-assignment2-memory_snapshot.pickle --at-index 1402 > golden/cuda-2026-assignment2-memory_snapshot.pickle.at1402.stats.json
python3 ref_stats.py $F/cuda-2026-assignment2-memory_snapshot.pickle --at-index -1 > golden/cuda-2026-assignment2-memory_snapshot.pickle.at-1.stats.json
for i in -1 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do
  python3 ref_stats.py cuda21_p4.pickle --at-index $i > golden/cuda21_p4.pickle.at$i.stats.json
done
for i in -1 0 2 3 5 8 9 11; do
  python3 ref_stats.py npu_workspace.pickle --at-index $i > golden/npu_workspace.pickle.at$i.stats.json
done
# holders (end, peak) and explain, by the independent reference ref_explain.py
for f in $F/*.pickle $F/*.pkl cuda21_p2.pickle cuda21_p3.pickle cuda21_p4.pickle cuda21_p5.pickle cuda21.json \
         npu_workspace.pickle torch113_list.pickle torch113_list.json wide_addr.pickle leak_steps.pickle \
         steps_annotation.pickle steps_optimizer.pickle steps_period.pickle steps_norepeat.pickle \
         forward_frames.pickle; do
  b=$(basename "$f")
  python3 ref_explain.py holders "$f" --at end > "golden/$b.holders-end.json"
  python3 ref_explain.py holders "$f" --at peak > "golden/$b.holders-peak.json"
  python3 ref_explain.py explain "$f" > "golden/$b.explain.json"
done
# holders by memory category (end, peak), by the same reference's category rules
for f in $F/*.pickle $F/*.pkl cuda21_p4.pickle npu_workspace.pickle leak_steps.pickle steps_optimizer.pickle steps_period.pickle; do
  b=$(basename "$f")
  python3 ref_explain.py holders "$f" --at end --by category > "golden/$b.categories-end.json"
  python3 ref_explain.py holders "$f" --at peak --by category > "golden/$b.categories-peak.json"
done
