"""On-CPU share (all running threads, py-spy without --gil) per stage; numba kernels count
under the Python frame that called them."""

import re
import sys

from stack_shares import print_shares

STAGES = [
    ("event loop: route /learn", r"learn \(.*routes/learn.py"),
    ("  JSON decode (depth check + orjson)", r"decode_body \("),
    ("  lists -> float64, labels (parse_examples)", r"parse_examples \("),
    ("  may_contain_bools scan", r"may_contain_bools"),
    (
        "event loop: HTTP body read / response",
        r"h11_impl|httptools_impl|http_protocol|read_json_body|OrjsonResponse",
    ),
    ("event loop: asyncio future completion", r"_call_set_state|_set_result_unless_cancelled"),
    ("learner thread: _learn_step (all)", r"_learn_step \("),
    ("  estimator step kernels (learn_rows -> numba)", r"learn_rows \("),
    ("  validate_data (pipeline _checked)", r"_checked \("),
    ("  calibration stage", r"observe \(.*stages/calibration.py"),
    ("  drift stage (DriftMonitor.update)", r"observe \(.*stages/drift.py"),
    ("  publish (published copy + view stats)", r"_publish \("),
    ("  prequential meter + rate + label runs", r"prequential|RateMeter|LabelRunMeter|correct_predictions"),
    ("  journal", r"_journal_add"),
    ("LearnerPool schedule / wake-ups", r"_schedule \(|notify \(|_work \(.*learners.py"),
    ("snapshot thread", r"snapshot"),
]
IDLE = re.compile(
    r"(LearnerPool\._work \(app/models/learners.py:85\)|Condition\.wait \(threading.py:\d+\)|"
    r"Runner\.run \(asyncio/runners.py:118\)|_worker \(concurrent/futures/thread.py:81\)|"
    r"select \(selectors.py:\d+\)|Event\.wait \(threading.py:\d+\))$"
)  # blocked threads py-spy still reports as active
print_shares(sys.argv[1], STAGES, idle=IDLE, top=12)
