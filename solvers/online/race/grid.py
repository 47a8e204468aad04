"""The scoring grids of the races: positions in received examples where a race's models are
compared (a rung checked, a cell scored, a promotion or a drift challenger decided).  Deciding
only at grid points makes a race independent of how the stream is cut into batches.

Two values, one per rule, kept apart because each rule's decisions depend on its grid (a
selector on 128, or challengers on 256, would decide at other points than they always have):

* :data:`SELECTION_GRID` — successive halving (``SelectionClassifier``): rungs and scoring
  segments are decided at multiples of it past the selector's window;
* :data:`CHALLENGER_GRID` — promotion by evidence (the service's challengers): the scoring
  cells of champion and challengers.
"""

#: Received examples between the selector's rung checks (successive halving).
SELECTION_GRID = 256
#: Received examples per scoring cell of a champion and its challengers (promotion by evidence).
CHALLENGER_GRID = 128
