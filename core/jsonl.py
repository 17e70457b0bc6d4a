"""JSONL data files: the one reader, the record checks under every validating loader, the atomic
writer, and a file's identity.

`read_jsonl` parses a file and lists the problems of its blank and malformed lines;
`check_record` lists one record's field problems; `load_jsonl` reads, checks and de-duplicates
a whole file with them; `data_error` turns a file's problems into one `DataError` naming the
file, the first line and the fix, so a bad file fails before any work starts. `write_jsonl`
writes records atomically, `output_folder` checks a data builder's --out before it reads
anything, `file_sha256` is a data file's identity in a model's or run's record. The schemas
themselves live with their loaders (core/prompts.py, evals/, tasks/); this module knows none.
"""

import hashlib
import json
import os
from pathlib import Path

from core.atomic import atomic_file
from core.errors import UserError

_MAX_REPORTED = 20


class DataError(UserError, ValueError):
    """A data file is missing, empty or malformed; `path` and `line` (1-based or None) say where."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None):
        super().__init__(message)
        self.path = path
        self.line = line


def file_sha256(*paths) -> str:
    """SHA-256 of the files' bytes, one after another (a data file's identity in a model's or
    run's record; the gold set's answers and labels files as one)."""
    h = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def data_error(path, errors: list[tuple[int, str]]) -> DataError:
    """One line for a file's problems [(line, message)]: the first line's first in full (where,
    what, the fix), then how many more and on which lines, so a CLI prints it as its one `error:`
    line."""
    errors = sorted(errors, key=lambda e: e[0])  # stable: a line's own problems keep their order
    first, msg = errors[0]
    text = f"{path} line {first}: {msg}"
    if len(errors) > 1:
        lines = sorted({n for n, _ in errors[1:]})
        shown = ", ".join(map(str, lines[:_MAX_REPORTED]))
        shown += ", ..." if len(lines) > _MAX_REPORTED else ""
        where = f"line {shown}" if len(lines) == 1 else f"lines {shown}"
        text += f" (and {len(errors) - 1} more problem(s): {where})"
    return DataError(text, path=path, line=first)


def read_jsonl(
    path, fix: str = "check the path"
) -> tuple[list[tuple[int, object]], list[tuple[int, str]]]:
    """A JSONL file's values [(line, value)] and the problems [(line, message)] of its blank and
    malformed lines: the one reader under every loader, which checks the values, adds its own
    problems and raises `data_error`. A file that is missing (`fix`: how to get it), not UTF-8
    or empty is a DataError at once."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DataError(f"{path}: file not found; {fix}", path=path)
    with open(path, encoding="utf-8") as f:
        try:
            lines = f.read().splitlines()
        except UnicodeDecodeError as e:
            raise DataError(f"{path}: not UTF-8 text ({e}); save it as UTF-8", path=path) from e
    if not any(line.strip() for line in lines):
        raise DataError(f"{path}: file is empty; it needs one JSON object per line", path=path)
    values, errors = [], []
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            errors.append((line_no, "blank line; remove it (one JSON object per line)"))
            continue
        try:
            values.append((line_no, json.loads(line)))
        except json.JSONDecodeError as e:
            errors.append((line_no, f"not valid JSON ({e.msg} at column {e.colno}); fix the line"))
    return values, errors


def check_record(record, fields, allowed, optional=(), flags=(), lists=()):
    """Problems with one parsed line, as a list of strings (empty if fine). `fields` are required
    strings, `optional` strings that may be absent, `flags` required booleans, `lists` required
    non-empty lists of non-empty strings."""
    if not isinstance(record, dict):
        return [f"expected a JSON object, got {type(record).__name__}; write one object per line"]
    problems = []
    for name in flags:
        if name not in record:
            problems.append(f"missing field {name!r}; write {name!r}: true or false")
        elif not isinstance(record[name], bool):
            problems.append(f"field {name!r} must be true or false, got {record[name]!r}")
    for name in lists:
        value = record.get(name)
        if not (isinstance(value, list) and value):
            problems.append(f"field {name!r} must be a non-empty list of strings")
        elif not all(isinstance(v, str) and v.strip() for v in value):
            problems.append(f"every entry of {name!r} must be a non-empty string")
    for name in (*fields, *(o for o in optional if o in record)):
        if name not in record:
            problems.append(f"missing field {name!r}; every line needs {', '.join(fields)}")
        elif not isinstance(record[name], str):
            problems.append(
                f"field {name!r} must be a string, got {type(record[name]).__name__}; quote it"
            )
        elif not record[name].strip():
            problems.append(f"field {name!r} is empty or whitespace; give it text or drop the line")
    known = (*fields, *optional, *flags, *lists)
    extra = sorted(set(record) - set(known))
    if extra:
        problems.append(
            f"unknown field(s) {', '.join(map(repr, extra))}; allowed: {', '.join(known)}"
        )
    for name, values in allowed.items():
        value = record.get(name)
        if isinstance(value, str) and value.strip() and value not in values:
            problems.append(f"{name} {value!r} is not one of {', '.join(values)}; use one of those")
    return problems


def load_jsonl(path, fields, allowed, unique_text, check=None, optional=(), flags=()):
    """Parse and validate a JSONL file; return its records or raise one DataError listing all
    problems. `unique_text` names fields whose (stripped) values must not repeat; `check(record)`
    returns extra problems for a record that passed the field checks; `optional` and `flags` are
    passed to `check_record`."""
    path = os.fspath(path)
    values, errors = read_jsonl(path, "check the path or run `uv run python -m data.make_data`")
    records = []
    first_seen = {name: {} for name in ("id", *unique_text)}
    for line_no, record in values:
        problems = check_record(record, fields, allowed, optional, flags)
        if not problems and check is not None:
            problems = check(record)
        if not problems:
            for name, seen in first_seen.items():
                key = record[name] if name == "id" else record[name].strip()
                if key in seen:
                    what = "id" if name == "id" else f"{name} text"
                    problems.append(
                        f"duplicate {what} {key[:60]!r} (first on line {seen[key]}); "
                        f"make it unique or delete one"
                    )
                else:
                    seen[key] = line_no
        if problems:
            errors.extend((line_no, p) for p in problems)
        else:
            records.append(record)

    if errors:
        raise data_error(path, errors)
    return records


def output_folder(path, flag: str = "--out") -> Path:
    """`path` as the folder a data builder writes into, checked before the builder reads anything:
    a UserError naming the flag when it, or the nearest part of it that exists, is not a folder
    (a missing folder is made when the files are written)."""
    path = Path(path)
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir():
        where = "" if existing == path else f" ({existing})"
        raise UserError(
            f"{flag} {path}{where} is a file, not a folder; give the folder to write the files into"
        )
    return path


def write_jsonl(records, path) -> Path:
    """One JSON object per line via a temp file renamed into place, so a failed run leaves no
    half-written file (the parent folder is made if missing)."""
    path = Path(path)
    with atomic_file(path) as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path
