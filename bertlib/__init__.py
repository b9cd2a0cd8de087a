"""bertlib: the BERT library that the chapters of *BERT End to End* build piece by piece.

Most modules here are generated from the chapters (their first line says which one);
`bertlib.book` and `bertlib.checks` are written by hand and serve the book itself.
"""

__version__ = "0.1.0"
