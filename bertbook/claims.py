"""A chapter's claims: printed with their verdict at every size, asserted only where a run
at that size has shown them.

A claim asserted at a size no run has tried is a guess that fails a reader's "Run all" when
it is wrong: chapter 08's left-to-right model guesses hidden words best at the `cpu` size
only because it learns from every position, and at the `gpu` size that is expected to flip.
So each size table says whether its claims have been shown (`assert_claims`), and a claim
at any other size still prints what it found.
"""

from __future__ import annotations

__all__ = ["claim"]


def claim(holds: bool, statement: str, assert_it: bool) -> None:
    """Print `statement` with its verdict; raise AssertionError if it fails and assert_it.
    It returns nothing, so a cell that ends with a claim shows the verdict alone."""
    verdict = "holds" if holds else "does NOT hold at this size"
    print(f"claim {verdict}: {statement}")
    if assert_it and not holds:
        raise AssertionError(f"claim failed: {statement}")
