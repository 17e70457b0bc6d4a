"""Strict JSON for what the commands print with --json and write as reports.

Python's json writes a NaN or an infinity as the bare words NaN / Infinity, which JSON does not
have: `jq`, JavaScript's JSON.parse and most other readers then reject the whole output (evaluate.py
once printed `"self_similarity": NaN`). `dumps` writes every non-finite float as null instead
(`finite` does the conversion; numpy floats included) and fails loudly (allow_nan=False) on
anything the conversion missed. `print_result` prints a benchmark's flat result: this JSON with
--json, else one aligned `key: value` line each. Imports no repository module.
"""

import json
import math


def finite(x):
    """`x` with every non-finite float (in dicts, lists and tuples, at any depth) made None."""
    if isinstance(x, float):  # numpy.float64 is a float too
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [finite(v) for v in x]
    if hasattr(x, "dtype") and getattr(x, "shape", None) == ():  # a numpy scalar
        return finite(x.item())
    return x


def dumps(obj, **kwargs) -> str:
    """json.dumps of `finite(obj)`, strict: NaN and infinities are null."""
    return json.dumps(finite(obj), allow_nan=False, **kwargs)


def print_result(result: dict, as_json: bool, width: int) -> None:
    """`result` as one strict JSON line (`as_json`), else a line per key, right-aligned to
    `width`, floats to 4 significant digits."""
    if as_json:
        print(dumps(result))
        return
    for k, v in result.items():
        print(f"{k:>{width}}: {v:.4g}" if isinstance(v, float) else f"{k:>{width}}: {v}")
