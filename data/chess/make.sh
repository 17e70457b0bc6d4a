#!/bin/sh
# Rebuild the shipped chess data (knowledge/chess.md). Needs Stockfish; the same Stockfish
# version gives the same bytes. Val and test exclude every position of the files before them.
set -e
cd "$(dirname "$0")/../.."
uv run python -m tasks.chess_data generate --out data/chess/train.jsonl --n 600 --seed 1 --depth 12
uv run python -m tasks.chess_data generate --out data/chess/val.jsonl --n 100 --seed 2 --depth 12 \
    --exclude data/chess/train.jsonl
uv run python -m tasks.chess_data generate --out data/chess/test.jsonl --n 100 --seed 3 --depth 12 \
    --exclude data/chess/train.jsonl data/chess/val.jsonl
