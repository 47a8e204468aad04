"""Inclusive share of GIL-held samples per stage from a py-spy raw (collapsed) file."""

import collections
import re
import sys
from pathlib import Path

STAGES = [
    ("route /learn (event loop)", r"learn \(.*routes/learn.py"),
    ("  JSON decode (orjson + depth check)", r"decode_body \("),
    ("    depth check", r"check_depth \("),
    ("  parse_examples (lists -> float64, labels)", r"parse_examples \("),
    ("    numeric_matrix / _parse_dense", r"_parse_dense \("),
    ("  registry.submit", r"submit \(.*registry"),
    ("asyncio future completion (_call_set_state)", r"_call_set_state"),
    ("learner thread: Learning._apply", r"_apply \(.*learning"),
    ("  pipeline.partial_fit", r"partial_fit \(.*pipeline.py"),
    ("    _observe (calibration + drift)", r"_observe \(.*pipeline.py"),
    ("      DriftStage.observe", r"observe \(.*stages/drift.py"),
    ("      CalibrationStage.observe", r"observe \(.*stages/calibration.py"),
    ("    learn_rows (estimator step, GIL part)", r"learn_rows \("),
    ("    _checked (validate_data)", r"_checked \(.*pipeline.py"),
    ("  publish / view", r"publish|_publish"),
    ("  meters (LabelRunMeter, estimator_stats)", r"LabelRunMeter|estimator_stats|meter"),
    ("LearnerPool._schedule", r"_schedule \("),
    ("threading Condition.notify", r"notify \(.*threading"),
    ("snapshot", r"snapshot"),
    ("HTTP body read (h11 / receive)", r"h11_impl|http_protocol|read_json_body"),
    ("_learn_step (meters, publish, contest)", r"_learn_step \("),
    ("  publish", r"publish"),
]
tot = 0
counts = collections.Counter()
leaf = collections.Counter()
for line in Path(sys.argv[1]).read_text().splitlines():
    stack, _, n = line.rstrip().rpartition(" ")
    n = int(n)
    tot += n
    for name, pat in STAGES:
        if re.search(pat, stack):
            counts[name] += n
    leaf[stack.split(";")[-1]] += n
print(f"samples {tot}")
for name, _ in STAGES:
    print(f"| {name} | {100 * counts[name] / tot:.1f} % |")
print("top leaves:")
for k, v in leaf.most_common(15):
    print(f"  {100 * v / tot:5.1f}  {k[:150]}")
