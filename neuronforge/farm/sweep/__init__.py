"""Export-configuration sweep: which (tp, batch, sequence length) of a model compile and load on an
instance, found with far fewer compiles than trying them one by one (see `search`)."""

from neuronforge.farm.sweep.records import CacheConfig, Record, RecordLog, records_path
from neuronforge.farm.sweep.search import METHODS, PLANNER_MARGIN, SweepResult, planner_need, sweep
from neuronforge.farm.sweep.space import BATCH_SIZES, Candidate, Space
from neuronforge.farm.sweep.trials import CommandTrial, PipelineTrial, Trial, TrialResult

__all__ = [
    "BATCH_SIZES",
    "METHODS",
    "PLANNER_MARGIN",
    "CacheConfig",
    "Candidate",
    "CommandTrial",
    "PipelineTrial",
    "Record",
    "RecordLog",
    "Space",
    "SweepResult",
    "Trial",
    "TrialResult",
    "planner_need",
    "records_path",
    "sweep",
]
