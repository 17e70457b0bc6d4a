"""Config dataclasses as command-line flags, written once for every command that has one.

`option(default, help)` declares a dataclass field with its help text (in the field's metadata);
`add_flags(parser, cls)` gives each field of `cls` one `--flag-name`, default the field's
default, typed from its annotation (bools as `--x/--no-x`). train.py's builder (config.py)
declares its fields with `option` too but adds its flags itself: there a flag left out must stay
absent, so the task's settings and a --config file can fill it.
"""

import argparse
import dataclasses
from dataclasses import field


def option(default, help_text, **metadata):
    """A dataclass field with its default and its help text (`help` in the field's metadata)."""
    return field(default=default, metadata={"help": help_text, **metadata})


def add_flags(p: argparse.ArgumentParser, cls) -> argparse.ArgumentParser:
    """One `--flag` per field of dataclass `cls`: bool fields as BooleanOptionalAction, the rest
    converted by the type named in the annotation (float, int, else str)."""
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        if f.type in (bool, "bool"):
            p.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=f.default,
                help=f.metadata["help"],
            )  # fmt: skip
            continue
        kind = str(f.type)
        conv = float if "float" in kind else int if "int" in kind else str
        p.add_argument(
            flag, type=conv, default=f.default, help=f"{f.metadata['help']} (default: {f.default})"
        )
    return p
