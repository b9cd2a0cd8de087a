"""bertbook: the scaffolding of the book *BERT End to End*, kept out of the library.

Sizes, the environment report, the exercise checks, the book's own datasets and task
builders, the measurement harness and the library map. It imports `bertlib`; `bertlib`
never imports it (a test reads every import to make sure).
"""

__version__ = "0.1.0"

__all__ = []  # no front door: import from the modules (bertbook.sizes, ...)
