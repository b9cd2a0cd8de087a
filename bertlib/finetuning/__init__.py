"""Fine-tuning: labelled examples, the task models and their features, the metrics, and
the road from a pretrained folder to a trained, scored, saved task model.
"""

__all__ = []
