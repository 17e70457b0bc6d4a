"""The data sets (JSONL, YAML, CSV) and the small builders that write them, each run from the
repository root as `uv run python -m data.make_data` (and so on); same bytes out on every run.

A leaf: a builder imports core and the commands' helpers, nothing imports a builder
(tests/test_layers.py).
"""
