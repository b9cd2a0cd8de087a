"""Chapter 06's before-and-after: hide one word of a held-out sentence, ask a masked LM for
its five likeliest pieces, and show the pieces around the `[MASK]`.

A look, not a measurement (the held-out scores are the measurement), so it lives in the
book's package and the chapter calls it.
"""

import torch

__all__ = ["hide_a_word", "top_guesses", "around_mask"]


def hide_a_word(sentence: str, tokenizer) -> tuple[dict, str] | None:
    """Mask the longest whole word of a sentence; return (batch, the hidden word)."""
    encoding = tokenizer.encode(sentence)
    words = [(i, t) for i, t in enumerate(encoding.tokens[1:-1], start=1)
             if t.isalpha() and i + 1 < len(encoding.tokens)
             and not encoding.tokens[i + 1].startswith("##")]
    if not words:
        return None
    position, word = max(words, key=lambda item: len(item[1]))
    ids = list(encoding.ids)
    ids[position] = tokenizer.mask_id
    batch = {"input_ids": torch.tensor([ids]),
             "token_type_ids": torch.zeros(1, len(ids), dtype=torch.long),
             "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
    return batch, word


@torch.no_grad()
def top_guesses(model, tokenizer, batch: dict, k: int = 5) -> list[str]:
    """The k likeliest pieces at the [MASK] of a one-row batch."""
    model.eval()
    batch = {name: t.to(next(model.parameters()).device) for name, t in batch.items()}
    position = int((batch["input_ids"][0] == tokenizer.mask_id).nonzero()[0])
    logits = model(**batch).mlm_logits[0, position]
    return [tokenizer.id_to_token[i] for i in logits.topk(k).indices.tolist()]


def around_mask(batch: dict, tokenizer, width: int = 12) -> str:
    """The pieces within `width` of the [MASK], as text."""
    ids = batch["input_ids"][0].tolist()
    position = ids.index(tokenizer.mask_id)
    window = ids[max(1, position - width):position + width + 1]
    return tokenizer.decode(window, skip_special=False).replace(" [SEP]", "")
