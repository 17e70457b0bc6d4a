"""The run folder: what makes a folder a run's, and its metrics log as every reader reads it.

train.py, sft.py and train_rm.py each write a run folder: `config.json` (the run's settings, not a
model's), `metrics.jsonl` (one JSON line per step; train_rm.py's `train_log.jsonl`),
`checkpoints/` and a `latest` pointer. The resolver (load_weights), runs.py, sweep.py, plots and
the loop's summary all ask here. What it is not: a writer (runlog.MetricsLog appends,
rl/checkpoint.py writes checkpoints). Imports no MLX, so runs.py stays quick to start.
"""

import json
from pathlib import Path

from core.errors import UserError

MARKERS = ("latest", "checkpoints", "metrics.jsonl", "train_log.jsonl")


class MetricsError(UserError, ValueError):
    """A metrics log line that is not JSON; the message names the file, the line and the fix."""


def is_run_folder(path) -> bool:
    """A folder a run wrote: one of MARKERS, or (before its first step) a config.json that is a
    run's settings (it names a `model`) rather than a model's (an HF config has `model_type`)."""
    path = Path(path)
    if not path.is_dir():
        return False
    if any((path / name).exists() for name in MARKERS):
        return True
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "model" in config and "model_type" not in config


def parse_line(line: str, path: Path, index: int) -> dict:
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise MetricsError(
            f"{path}:{index + 1} is not valid JSON ({e}): {line[:80]!r}; fix or remove that line"
        ) from e


def read_metrics(path) -> list[dict]:
    """A metrics log's rows, one per complete line; [] when the file does not exist yet. The text
    after the last newline (a write in progress, or a crash mid-write, which a resume drops) is
    not a row; any other line that is not JSON is a MetricsError."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_text().split("\n")[:-1]
    return [parse_line(line, path, i) for i, line in enumerate(lines) if line.strip()]
