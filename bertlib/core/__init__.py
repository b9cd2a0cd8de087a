"""The encoder itself: its config, attention, the layers and BertModel, the checkpoint
folders it reads and writes, the checks at its edge, and Google's original checkpoints.

Everything else in bertlib builds on this package; it imports nothing of theirs.
"""

__all__ = []
