"""Pretraining: masking and next-sentence data, the pretraining models (masked LM, next
sentence, left-to-right), and the one road, `pretrain`, that trains them into a folder.
"""

__all__ = []
