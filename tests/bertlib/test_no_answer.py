"""SQuAD 2.0's no-answer rule (Devlin et al., 2018, §4.3)."""

from __future__ import annotations

import torch

from bertlib.finetuning.metrics import answer_or_abstain

PARAGRAPH = torch.tensor([False, False, True, True, True])


def test_the_best_span_wins_only_when_it_beats_cls_by_the_threshold():
    start = torch.tensor([1.0, 0.0, 2.0, 0.0, 0.0])
    end = torch.tensor([1.0, 0.0, 0.0, 1.5, 0.0])
    # span (2, 3) scores 3.5 against 2.0 at [CLS]
    assert answer_or_abstain(start, end, PARAGRAPH) == (2, 3)
    assert answer_or_abstain(start, end, PARAGRAPH, threshold=1.4) == (2, 3)
    assert answer_or_abstain(start, end, PARAGRAPH, threshold=1.5) is None


def test_cls_is_never_returned_as_a_span():
    start = torch.tensor([9.0, 0.0, 0.1, 0.0, 0.0])
    end = torch.tensor([9.0, 0.0, 0.0, 0.1, 0.0])
    assert answer_or_abstain(start, end, PARAGRAPH) is None
    assert answer_or_abstain(start, end, PARAGRAPH, threshold=-100.0) == (2, 3)
