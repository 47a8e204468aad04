#!/bin/bash
# interleaved: before, after, before, after, ... one round of learn_vs_core.py each
S=/work/wt-speed/benchmarks/profiling/learn_vs_core.py
(cd ${BEFORE:-/work/base} && .venv/bin/python $S 1 > /dev/null 2>&1)  # numba cache of the new tree
for r in 1 2 3; do
  (cd ${BEFORE:-/work/base} && .venv/bin/python $S 1 | grep '^round' | sed "s/^round 1/before $r/")
  (cd /work/wt-speed && .venv/bin/python $S 1 | grep '^round' | sed "s/^round 1/after $r/")
done
