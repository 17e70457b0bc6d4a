"""TensorBoard event files for a run: the step's metrics, reward/advantage histograms, samples.

`TBLog(RUN_DIR/tb)` writes with the `tensorboard` package's own EventFileWriter and summary
protos, so `tensorboard --logdir runs` shows every run. Per step: every numeric metric as a
scalar (the same values metrics.jsonl holds; a NaN/inf/None metric, a null in metrics.jsonl, is
skipped, so the curve has a gap; text values are skipped), and with rollout rows (runlog's
`rollout_rows`) histograms of the finite rewards, the advantages and the lengths, plus a markdown
text of the best and worst completions (prompt, completion, reward), each cut to a bounded size.
`truncate_after(step)` rewrites the event files without the events after `step` (a resume from a
checkpoint), one file at a time, atomically. Not a reader: TensorBoard (or its
EventAccumulator) reads these files.
"""

import time
from pathlib import Path

from core.atomic import atomic_file

import numpy as np

from rl.runlog import _scalar  # the conversion metrics.jsonl uses, so both logs hold equal values

HIST_BINS = 30


def scalar_tag(key: str, prefix: str) -> str:
    """TensorBoard groups charts by the text before the first '/': 'loss' -> 'train/loss',
    'reward/curiosity' and 'eval/reward' keep their names."""
    return key if "/" in key else f"{prefix}/{key}"


def event_files(log_dir) -> list[Path]:
    """The event files of a log folder in the order TensorBoard reads them (by name)."""
    return sorted(p for p in Path(log_dir).glob("*tfevents*") if p.is_file())


class TBLog:
    """One run's event files; the writer opens on the first `add` (after any truncation)."""

    def __init__(self, log_dir, prefix: str = "train", samples: int = 4, max_chars: int = 1500):
        self.log_dir, self.prefix = Path(log_dir), prefix
        self.samples, self.max_chars = samples, max_chars
        self._writer = None

    def add(self, step: int, metrics: dict, rows: list[dict] | None = None) -> None:
        """Log one step; written and flushed before returning (a crash loses nothing)."""
        from tensorboard.compat.proto import event_pb2, summary_pb2  # start-up: see _open

        values = []
        for key, v in metrics.items():
            v = _scalar(v, key)
            if isinstance(v, float):  # None (NaN/inf/None) and text are skipped
                values.append(
                    summary_pb2.Summary.Value(tag=scalar_tag(key, self.prefix), simple_value=v)
                )
        if rows:
            values += self._rollout_values(rows)
        if self._writer is None:
            self._writer = self._open()
        summary = summary_pb2.Summary(value=values)
        self._writer.add_event(
            event_pb2.Event(step=int(step), wall_time=time.time(), summary=summary)
        )
        self._writer.flush()

    def _rollout_values(self, rows: list[dict]) -> list:
        from tensorboard.plugins.text.summary_v2 import text_pb  # start-up: see _open

        out = []
        for name in ("reward", "advantage", "length"):
            x = np.array([np.nan if r.get(name) is None else r[name] for r in rows], np.float64)
            x = x[np.isfinite(x)]  # failed judgements: counted in reward_nan, not drawn
            if x.size:
                out.append(hist_value(f"rollout/{name}", x))
        text = sample_markdown(rows, self.samples, self.max_chars)
        if text:
            out += list(text_pb("rollout/samples", text).value)
        return out

    def _open(self):
        # start-up: tensorboard takes a second or more to import; --no-tensorboard never needs it
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        # Files are read in name order and a name starts with its creation second: wait out the
        # second of the newest file so a resumed run's file sorts after the files it continues.
        stamps = [int(p.name.split(".")[3]) for p in event_files(self.log_dir)]
        if stamps and max(stamps) >= int(time.time()):
            time.sleep(max(stamps) + 1 - time.time())
        return EventFileWriter(str(self.log_dir), flush_secs=10)

    def truncate_after(self, step: int) -> None:
        """Drop events with step > step from every event file (resume from checkpoint `step`).
        Each changed file is rewritten beside itself and renamed over it: a crash leaves each
        file old or new, and running this again finishes the job."""
        # start-up: see _open (tensorboard only when a run logs to it)
        from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
        from tensorboard.compat.proto import event_pb2  # start-up
        from tensorboard.summary.writer.record_writer import RecordWriter  # start-up

        self.close()
        for path in event_files(self.log_dir):
            records = list(RawEventFileLoader(str(path)).Load())
            kept = [r for r in records if event_pb2.Event.FromString(r).step <= step]
            # 16 bytes of framing per record; more on disk = a record cut short by a crash
            if kept == records and path.stat().st_size == sum(len(r) + 16 for r in records):
                continue
            with atomic_file(path, "wb", fsync=True) as f:
                writer = RecordWriter(f)
                for r in kept:
                    writer.write(r)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def hist_value(tag: str, x: np.ndarray):
    """A HistogramProto summary value of the values x (finite), in <= HIST_BINS equal bins
    (bucket i holds bucket[i] values up to bucket_limit[i]); equal values make one bin."""
    from tensorboard.compat.proto import summary_pb2  # start-up: see TBLog._open

    lo, hi = float(x.min()), float(x.max())
    span = (lo, hi) if hi > lo else (lo - 0.5, lo + 0.5)
    counts, edges = np.histogram(x, bins=HIST_BINS if hi > lo else 1, range=span)
    proto = summary_pb2.HistogramProto(
        min=lo,
        max=hi,
        num=float(x.size),
        sum=float(x.sum()),
        sum_squares=float((x * x).sum()),
        bucket_limit=edges[1:].tolist(),
        bucket=counts.astype(np.float64).tolist(),
    )
    return summary_pb2.Summary.Value(tag=tag, histo=proto)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" [... {len(text) - limit} chars cut]"


def sample_markdown(rows: list[dict], n: int, max_chars: int) -> str:
    """Markdown of the n/2 highest- and n/2 lowest-reward completions (finite rewards, ties in
    row order); prompt and completion are indented code blocks, each cut to max_chars."""
    scored = [r for r in rows if r.get("reward") is not None and np.isfinite(r["reward"])]
    order = sorted(range(len(scored)), key=lambda i: -scored[i]["reward"])
    if len(order) > n:
        order = order[: (n + 1) // 2] + order[len(order) - n // 2 :]
    blocks = []
    for i in order:
        r = scored[i]
        adv = r.get("advantage")
        head = f"**reward {r['reward']:.3f}**" + (
            f", advantage {adv:+.3f}" if adv is not None else ""
        )
        head += f" · {r.get('category', '')} · {r.get('prompt_id', '')}"
        blocks.append(
            "\n\n".join(
                [
                    head,
                    "prompt:",
                    _indent(_cut(str(r["prompt"]), max_chars // 3)),
                    "completion:",
                    _indent(_cut(str(r["completion"]), max_chars)),
                ]
            )
        )
    return "\n\n---\n\n".join(blocks)


def _indent(text: str) -> str:
    """An indented markdown code block: shown verbatim, whatever backticks the text holds."""
    return "\n".join("    " + line for line in (text.splitlines() or [""]))
