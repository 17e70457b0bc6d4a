"""Every shipped folder of models/ carries a card (README.md) that says how it was made.

A model folder is models/NAME/ or models/candidates/NAME/ holding a file git tracks (a user's
own untracked folder, such as the README's models/my-rm, is not checked; outside a git checkout
every folder on disk is). Its README.md must open with `# NAME`, name its command (`uv run`),
its data (a `data/` or `datasets/` path), their licenses, and its seed ("not recorded" where
the record does not say). Reads text only: no model is loaded.
"""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
CANDIDATES = "candidates"


def folder_of(parts: tuple[str, ...]) -> str | None:
    """The model folder (relative to models/) a path's parts under models/ belong to."""
    if parts and parts[0] == CANDIDATES:
        return f"{CANDIDATES}/{parts[1]}" if len(parts) >= 3 else None
    return parts[0] if len(parts) >= 2 else None


def model_folders(root: Path = ROOT) -> list[str]:
    """Model folders relative to models/: those git tracks, or every one on disk without git."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "models"], cwd=root, capture_output=True, check=True
        ).stdout.decode()
        paths = [Path(p).relative_to("models").parts for p in out.split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        models = root / "models"
        paths = [p.relative_to(models).parts for p in models.rglob("*") if p.is_file()]
    return sorted({f for f in map(folder_of, paths) if f})


def card_problems(folder: Path) -> list[str]:
    """What the folder's card lacks, each as a line naming the folder and the fix."""
    card = folder / "README.md"
    if not card.is_file():
        return [
            f"{folder}: no README.md; write its card (what it is, command, data, licenses, seed)"
        ]
    text = card.read_text(encoding="utf-8")
    first = text.splitlines()[0] if text else ""
    checks = [
        (first.startswith(f"# {folder.name}"), f"line 1 {first!r} is not '# {folder.name}: ...'"),
        ("uv run" in text, "it names no command (`uv run ...`) that made the model"),
        (re.search(r"\bdata/|datasets/", text), "it names no data (a data/ or datasets/ path)"),
        ("license" in text.lower(), "it states no license of its data and base model"),
        ("seed" in text.lower(), "it states no seed (write 'seed: not recorded' if none is)"),
    ]  # fmt: skip
    return [f"{card}: {why}" for ok, why in checks if not ok]


def test_folder_of_names_top_level_and_candidate_folders():
    assert folder_of(("rm", "rm_config.json")) == "rm"
    assert folder_of(("rm", "pushback", "rm_config.json")) == "rm"
    assert folder_of((CANDIDATES, "a15", "README.md")) == f"{CANDIDATES}/a15"
    assert folder_of((CANDIDATES, "README.md")) is None
    assert folder_of(("README.md",)) is None


def test_card_problems_names_each_missing_part(tmp_path):
    folder = tmp_path / "new-model"
    folder.mkdir()
    assert len(card_problems(folder)) == 1 and "no README.md" in card_problems(folder)[0]
    (folder / "README.md").write_text("# other: a model\n\nTrained somehow.\n")
    problems = "\n".join(card_problems(folder))
    for part in ("line 1", "command", "no data", "license", "seed"):
        assert part in problems, (part, problems)
    (folder / "README.md").write_text(
        "# new-model: a model\n\n    uv run python train.py --data data/prompts.jsonl\n\n"
        "Data and license: the project's own (MIT). Seed 0.\n"
    )
    assert card_problems(folder) == []


def test_untracked_folders_are_not_model_folders(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for name in ("shipped/a.json", "candidates/old/a.json", "candidates/README.md", "mine/a.json"):
        (tmp_path / "models" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "models" / name).write_text("{}")
    subprocess.run(["git", "add", "models/shipped", "models/candidates"], cwd=tmp_path, check=True)
    assert model_folders(tmp_path) == [f"{CANDIDATES}/old", "shipped"]


FOLDERS = model_folders()


def test_models_has_folders():
    assert FOLDERS, f"no model folder found under {MODELS}"


@pytest.mark.parametrize("name", FOLDERS)
def test_every_model_folder_has_a_card(name):
    problems = card_problems(MODELS / name)
    assert not problems, "\n".join(problems)


def test_candidates_index_lists_every_candidate():
    candidates = [f.split("/", 1)[1] for f in FOLDERS if f.startswith(f"{CANDIDATES}/")]
    index_file = MODELS / CANDIDATES / "README.md"
    index = index_file.read_text(encoding="utf-8") if candidates else ""
    missing = [c for c in candidates if f"`{c}/`" not in index]
    assert not missing, f"models/{CANDIDATES}/README.md does not list {missing}: add a row each"
