"""The benchmarks other than the card's bench_rollout.py, and the mutation check; each runs from
the repository root as `uv run python -m bench.NAME`. Results: knowledge/benchmarks.md.

A leaf, like the commands and experiments: nothing imports a benchmark (tests/test_layers.py).
"""
