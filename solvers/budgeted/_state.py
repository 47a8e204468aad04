"""Layout of a budgeted model's state, shared by the BSGD and BSCA steps and the estimators.

State arrays (all preallocated, owned by the estimator):

* ``sv_t`` (d, B+1) float64 — SVs as columns; ``sv_sq`` (B+1,) float64 — their ‖·‖²;
* ``coef`` (B+1, K) float64 — raw coefficients (K = 1 for binary models);
* ``bias`` (K,) float64;
* ``counters`` int64 array, indices ``C_*``; ``reals`` float64 array, indices ``R_*``;
* ``k_inv`` (B+1, B+1) float64 — inverse kernel matrix, maintained for projection only.

The model is ``w_c = reals[R_SCALE] · Σ_j coef[j, c] · φ(sv_j)`` (+ ``bias[c]``): the Pegasos
scale trick keeps the shrink ``w ← (1 − ηλ)w`` O(1).
"""

from .._params import MAINTENANCE, SCHEDULES

# counters[...]
C_N_SV = 0
C_STEPS = 1
C_MERGES = 2
C_VIOLATIONS = 3
C_MAINTENANCE = 4
C_SCHED_SHIFT = 5  # the schedule's t is C_STEPS − C_SCHED_SHIFT (a drift reset moves it)
C_RESET_PENDING = 6  # unused: states saved before the drift stage left the engine hold its flag here
N_COUNTERS = 7
# reals[...]
R_SCALE = 0
R_WD_SUM = 1  # Σ weight degradation (effective units) over maintenance events
R_NORM2 = 2  # ‖w‖² (kept for the margin perceptron's ball projection only)
R_MERGE_SECONDS = 3  # wall time spent in budget maintenance (when profiling)
N_REALS = 4

# schedules (Table 2 of Wang et al. 2012)
SCHED_PEGASOS = SCHEDULES["pegasos"]  # η_t = 1/(λt)
SCHED_NORMA = SCHEDULES["norma"]  # η_t = η/√t
SCHED_PERCEPTRON = SCHEDULES["perceptron"]  # λ = 0, η_t = η, projection onto ‖w‖ ≤ U
SCHED_CONSTANT = SCHEDULES["constant"]  # η_t = η, shrink 1 − ηλ (a fixed memory, for drifting streams)

# budget maintenance (§6)
MAINT_MERGE = MAINTENANCE["merge"]
MAINT_REMOVE = MAINTENANCE["remove"]
MAINT_PROJECT = MAINTENANCE["project"]

RESCALE_BELOW = 1e-6
#: projection: the maintained K⁻¹ is rebuilt from scratch every this many × B maintenance
#: events, bounding the rounding drift of the O(B²) incremental updates (docs/projection.md)
KINV_REBUILD_EVERY_B = 10
