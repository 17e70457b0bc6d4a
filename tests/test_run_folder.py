"""run_folder: the one test of "is this a run's folder" and the one metrics reader."""

import json

from core import run_folder
from core.run_folder import MetricsError, is_run_folder, read_metrics

import pytest


def test_a_run_folder_by_its_markers_or_its_run_config(tmp_path):
    for marker in run_folder.MARKERS:
        d = tmp_path / marker.replace(".", "_")
        d.mkdir()
        (d / marker).write_text("")
        assert is_run_folder(d), marker
    started = tmp_path / "started"  # train.py wrote its config, no step yet
    started.mkdir()
    (started / "config.json").write_text(json.dumps({"model": "smollm2-135m", "steps": 3}))
    assert is_run_folder(started)
    model = tmp_path / "hf_model"  # an HF model folder is not a run, whatever else it holds
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen3", "model": "x"}))
    assert not is_run_folder(model)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{")
    assert not is_run_folder(broken)
    assert not is_run_folder(tmp_path / "missing")
    assert not is_run_folder(started / "config.json")  # a file is not a folder


def test_read_metrics_drops_only_the_unfinished_last_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    assert read_metrics(path) == []  # before the first step
    path.write_text('{"step": 1, "loss": 0.5}\n\n{"step": 2, "loss": 0.25}\n{"step": 3, "lo')
    assert read_metrics(path) == [{"step": 1, "loss": 0.5}, {"step": 2, "loss": 0.25}]
    path.write_text('{"step": 1}\n{"step": 2, "lo\n{"step": 3}\n')
    with pytest.raises(MetricsError, match=r"metrics.jsonl:2 is not valid JSON.*fix or remove"):
        read_metrics(path)
