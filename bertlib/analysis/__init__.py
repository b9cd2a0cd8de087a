"""Looking inside a trained BERT: every layer's vectors, attention patterns, and probes."""

__all__ = []
