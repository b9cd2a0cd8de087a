"""Training, whatever the objective: the optimiser and its schedule, the trainer (mixed
precision, accumulation, checkpoints that resume exactly), packing, and data parallelism.
"""

__all__ = []
