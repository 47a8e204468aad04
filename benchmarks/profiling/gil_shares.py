"""Inclusive share of GIL-held samples per stage from a py-spy raw (collapsed) file."""

import sys

from stack_shares import print_shares

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
print_shares(sys.argv[1], STAGES, top=15, heading="top leaves:")
