#!/bin/bash
# usage: prof.sh TREE SETTINGS_JSON TAG
TREE=$1; SET=$2; TAG=$3; PORT=$((18000 + RANDOM % 1000))
cd $TREE
SNAP=$(mktemp -d)
SVMSTREAM_CREATE_DEFAULT_MODEL=false SVMSTREAM_LOG_LEVEL=warning .venv/bin/python -m svmstream.app.cli.main serve --host 127.0.0.1 --port $PORT --snapshot-dir $SNAP > ${OUT:-/tmp}/$TAG.server.log 2>&1 &
SP=$!
for i in $(seq 100); do curl -s 127.0.0.1:$PORT/health >/dev/null && break; sleep 0.3; done
# warm-up run (numba cache), then measured run under py-spy
.venv/bin/python benchmarks/profiling/learn_load.py $PORT "$SET" 50 1 > /dev/null
C0=$(awk '{print $14+$15}' /proc/$SP/stat)
.venv/bin/py-spy record ${GIL---gil} -f raw -r 200 -p $SP -o ${OUT:-/tmp}/$TAG.gil.raw > ${OUT:-/tmp}/$TAG.pyspy.log 2>&1 &
PS=$!
sleep 1
T0=$(date +%s.%N)
.venv/bin/python benchmarks/profiling/learn_load.py $PORT "$SET" 50 2 | tail -1
T1=$(date +%s.%N)
C1=$(awk '{print $14+$15}' /proc/$SP/stat)
kill -INT $PS; wait $PS
echo "server cpu ticks: $((C1-C0)) (1/100 s) for 99980 ex; wall $(echo "$T1-$T0"|bc); load $(cut -d' ' -f1-3 /proc/loadavg)"
kill $SP; wait $SP 2>/dev/null; rm -rf $SNAP
