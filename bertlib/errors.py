"""Every error bertlib raises on purpose, under one root: `except BertlibError` catches them.

Each class also derives from the built-in exception that fits it (a bad value is a
ValueError, a missing file a FileNotFoundError), so code written against the built-ins
keeps working. Errors are raised where input enters the library (configs, the tokenizer,
collators, checkpoint folders, the model's edge), and each message says what to do.
"""

__all__ = [
    "BertlibError",
    "ConfigError",
    "InputError",
    "TokenizerError",
    "CheckpointError",
    "DataUnavailable",
    "TrainingDiverged",
]


class BertlibError(Exception):
    """The root of every error that bertlib raises on purpose."""


class ConfigError(BertlibError, ValueError):
    """A configuration no BERT (or no training run) can have, or an unreadable config.json."""


class InputError(BertlibError, ValueError):
    """Input with the wrong shape, type or range; the message says how to fix it."""


class TokenizerError(InputError):
    """Text or a vocabulary the tokenizer cannot use."""


class CheckpointError(BertlibError, ValueError):
    """A checkpoint that is missing, unreadable, or does not fit the model; the message
    lists every problem."""


class DataUnavailable(BertlibError, FileNotFoundError):
    """A data package, file or download is missing; the message names what installs it."""


class TrainingDiverged(BertlibError, RuntimeError):
    """The loss became NaN, infinite or too large; the message says what to try."""
