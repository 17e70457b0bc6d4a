"""User errors, and the one way every command reports them.

A user error is a mistake in what the person asked for: a flag value, a config, data or labels
file, a model path, a missing tool. A command reports it as one line, `error: <message>` on
stderr (the message says where and how to fix it), and exits with status 2, before any model work
where it can. Every user-facing error class derives from `UserError` and keeps its other base
(jsonl.DataError is also a ValueError), so an older `except ValueError` still holds. A bug is
not a user error: it keeps its traceback. `cli` wraps each command's `main`; `as_user_error`
marks the few blocks where a plain ValueError means bad input. Ctrl-C is left to each command
(train.py checkpoints on it). This module imports no repository module.
"""

import contextlib
import functools
import sys

EXIT_USER_ERROR = 2


class UserError(Exception):
    """A mistake in the user's input, not a bug: a command prints it as one `error: ...` line on
    stderr and exits with status 2 (`cli`). The message names the value or file and the fix."""


# Raised by the commands for a path the user gave: open() on a missing file, and our own
# "not found" / "already holds a run" checks (rl/checkpoint.py, rl/runlog.py, sft.py, train.py).
USER_ERRORS = (UserError, FileNotFoundError, FileExistsError)


def one_line(error: BaseException) -> str:
    """The error's message on one line (a wrapped library message keeps its words)."""
    text = " ".join(part.strip() for part in str(error).splitlines() if part.strip())
    return text or type(error).__name__


def cli(main):
    """Decorate a command's `main(argv=None)`: a user error becomes one `error: ...` line on
    stderr and the return value 2; anything else (the return value, other exceptions,
    KeyboardInterrupt, argparse's own exit 2) passes through unchanged."""

    @functools.wraps(main)
    def wrapped(*args, **kwargs):
        try:
            return main(*args, **kwargs)
        except USER_ERRORS as e:
            print(f"error: {one_line(e)}", file=sys.stderr)
            return EXIT_USER_ERROR

    return wrapped


@contextlib.contextmanager
def as_user_error(*types: type[Exception]):
    """Inside the block, an exception of `types` is the user's (a settings dataclass's
    __post_init__ check raising ValueError, a reward spec that does not parse): it leaves as a
    UserError with the same message. Keep the block to the input checks, so a bug further on
    still gets its traceback."""
    try:
        yield
    except UserError:
        raise
    except types as e:
        raise UserError(one_line(e)) from e
