"""Config dataclasses as command-line flags, written once for every command that has one.

`option(default, help)` declares a dataclass field with its help text (in the field's metadata);
`add_flags(parser, cls)` gives each field of `cls` one `--flag-name`, default the field's
default, typed from its annotation (bools as `--x/--no-x`); train.py's (rl/config.py) adds them
`layered`: a flag left out stays absent, so the task's settings and a --config file can fill it,
and `none` switches an optional setting off. `parse_config(parser, cls, argv)` builds `cls` from
the parsed flags (sft.py, train_rm.py), a failed check one user error. `renamed(parser, old,
new)` keeps a flag's old spelling working, hidden from --help, with one deprecation line on
stderr: one spelling per setting across the commands (`--max-new-tokens`,
`--prompts-per-step`, ...); `retired(parser, old, why)` keeps a removed flag's spelling as a
hidden one that fails with one user error saying what replaced it. `--dtype` is declared here
once (`dtype_option` for a config field, `add_dtype` for a plain parser): the same choices and
help on every command.
"""

import argparse
import dataclasses
import sys
from dataclasses import field

from core import backend, errors

# The one --dtype every command that loads a model takes (flags.add_dtype, flags.dtype_option).
DTYPE_HELP = "the weights' dtype"
DTYPE_DEFAULT = "float32 on CPU; on Metal/CUDA the checkpoint's torch_dtype, else bfloat16"


def option(default, help_text, **metadata):
    """A dataclass field with its default and its help text (`help` in the field's metadata)."""
    return field(default=default, metadata={"help": help_text, **metadata})


def add_flags(
    p: argparse.ArgumentParser, cls, layered: bool = False, default_text=None
) -> argparse.ArgumentParser:
    """One `--flag` per field of dataclass `cls`: bool fields as BooleanOptionalAction, the rest
    converted by the type named in the annotation (float, int, else str). `layered` (train.py,
    whose task and --config file fill what the command line leaves out): a flag not given stays
    out of the namespace, and an optional field's flag reads `none` as None, so the command line
    can switch off what a lower layer set. `default_text(field)`: the default as help shows it."""
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        default = argparse.SUPPRESS if layered else f.default
        if f.type in (bool, "bool"):
            p.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=default,
                help=f.metadata["help"],
            )  # fmt: skip
            continue
        kind = str(f.type)
        conv = float if "float" in kind else int if "int" in kind else str
        if layered and "None" in kind:
            conv = _optional(conv)
        shown = f.metadata.get("shown") or (default_text(f) if default_text else f.default)
        choices = f.metadata.get("choices")  # shown; the config's own checks refuse the rest
        metavar = "{" + ",".join(choices) + "}" if choices else None
        p.add_argument(
            flag, type=conv, default=default, metavar=metavar,
            help=f"{f.metadata['help']} (default: {shown})",
        )  # fmt: skip
    return p


def dtype_option():
    """The `dtype` field of a command's config dataclass: --dtype, as add_dtype declares it."""
    return option(None, DTYPE_HELP, choices=backend.DTYPE_NAMES, shown=DTYPE_DEFAULT)


def add_dtype(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """--dtype for a command without a config dataclass: the same name, values and help. The
    command checks the value (backend.parse_dtype), so a bad one is its one `error:` line."""
    p.add_argument(
        "--dtype", default=None, metavar="{" + ",".join(backend.DTYPE_NAMES) + "}",
        help=f"{DTYPE_HELP} (default: {DTYPE_DEFAULT})",
    )  # fmt: skip
    return p


def parse_config(p: argparse.ArgumentParser, cls, argv=None) -> tuple:
    """(`cls` built from the fields' flags, {dest: value} of the parser's other flags) for a
    parser that `add_flags(p, cls)` filled; a ValueError from `cls`'s checks is a UserError."""
    args = vars(p.parse_args(argv))
    names = {f.name for f in dataclasses.fields(cls)}
    with errors.as_user_error(ValueError):  # the config's __post_init__ checks
        cfg = cls(**{k: v for k, v in args.items() if k in names})
    return cfg, {k: v for k, v in args.items() if k not in names}


def _optional(conv):
    """An optional field's converter: `none` (any case) is None (`--kl-target none`)."""

    def convert(text: str):
        return None if text.strip().lower() == "none" else conv(text)

    convert.__name__ = conv.__name__  # argparse names the type in its error message
    return convert


class _Renamed(argparse.Action):
    """An old spelling of a flag: stores into the new flag's dest, after one warning line."""

    def __init__(self, option_strings, dest, new, value=None, **kw):
        super().__init__(option_strings, dest, **kw)
        self.new, self.value = new, value

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"warning: {option_string} is deprecated; use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, self.value if self.nargs == 0 else values)


def renamed(p: argparse.ArgumentParser, old: str, new: str) -> None:
    """Accept `old` as a hidden alias of `new`, a flag `p` already has (same dest, type and
    choices; a store_true flag stays one): using it prints `warning: OLD is deprecated; use
    NEW` to stderr."""
    action = p._option_string_actions[new]  # argparse keeps no public index of its flags
    p.add_argument(
        old, action=_Renamed, new=new, dest=action.dest, default=argparse.SUPPRESS,
        help=argparse.SUPPRESS, type=action.type, choices=action.choices,
        nargs=action.nargs, value=action.const if action.nargs == 0 else None,
    )  # fmt: skip


class _Retired(argparse.Action):
    """A removed flag: using it, with or without a value, is a user error saying what replaced
    it."""

    def __init__(self, option_strings, dest, why, **kw):
        super().__init__(option_strings, dest, **kw)
        self.why = why

    def __call__(self, parser, namespace, values, option_string=None):
        raise errors.UserError(f"{option_string} was retired: {self.why}")


def retired(p: argparse.ArgumentParser, old: str, why: str) -> None:
    """Keep `old`, a flag that no longer exists, as a hidden spelling that fails: parsing it
    raises `UserError("OLD was retired: WHY")` (one `error:` line and exit 2 under errors.cli),
    so a script that still passes it stops before any work instead of argparse's bare
    `unrecognized arguments`. `why` says what replaced it."""
    p.add_argument(
        old, action=_Retired, why=why, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
        nargs="?", help=argparse.SUPPRESS,
    )  # fmt: skip
