"""Minimal pairs (a false premise and its true twin, `pair` ids) and splits that keep a claim whole.

`minimal_pairs` gives (false, true twin) from a prompt set; `pairs_and_singles` the pairs beside
the records in no pair (core/prompts.PairedStream serves them); `claim_key` is the id a record's
claim goes by, so both halves of a pair land on the same side of a split; `claim_groups` joins
pairs whose false halves share a rare word run (one claim in several frames), and
`fold_of_groups` deals whole groups into folds. The premise probe, the stance contrast and the
opener gate split with these; this module loads no file (core/prompts.load_prompts does).
"""

import re

from core.jsonl import DataError

import numpy as np


def claim_key(record: dict) -> str:
    """The id a record's claim goes by: a true twin's is its false premise's (`pair`), so the two
    halves of a minimal pair land on the same side of any split."""
    return record.get("pair") or record["id"]


def pairs_and_singles(records: list[dict]) -> tuple[list[tuple[dict, dict]], list[dict]]:
    """([(named record, its twin)] in the twins' file order, the records in no pair)."""
    by_id = {r["id"]: r for r in records}
    pairs = [(by_id[r["pair"]], r) for r in records if "pair" in r]
    paired = {r["id"] for pair in pairs for r in pair}
    return pairs, [r for r in records if r["id"] not in paired]


def minimal_pairs(records: list[dict]) -> list[tuple[dict, dict]]:
    """(false, true twin) for every record that names its partner with `pair`; load_prompts has
    already checked that each named id exists and is named once."""
    pairs, _ = pairs_and_singles(records)
    reversed_ = [f"{b['id']} -> {a['id']}" for a, b in pairs if a["category"] == "control"]
    if reversed_:
        raise DataError(
            f"{len(reversed_)} twin(s) name a control prompt as their false half "
            f"({', '.join(reversed_[:3])}); `pair` goes on the true twin and names the false one"
        )
    if not pairs:
        raise DataError(
            "the pairs file has no record with a `pair` field (a true twin naming its false "
            "premise's id); pass e.g. --pairs data/prompts.jsonl,data/twins_v2.jsonl"
        )
    return pairs


def prompt_words(text: str) -> list[str]:
    """The lower-cased words of a prompt, as the claim groups and the bag of words read them."""
    return re.findall(r"[a-z0-9']+", text.lower())


def claim_groups(pairs: list[tuple[dict, dict]], run: int = 4, max_share: int = 4) -> np.ndarray:
    """Group index of each pair: pairs whose false halves share a rare `run`-word sequence (one
    that at most `max_share` false halves hold) are one group. Template prompts put one claim
    in several frames ("Settle a debate for us: my brother says <claim>", "Can you confirm that
    <claim>?"); folds by pair alone would train on a claim's other frames and test on it, so a
    probe (or the bag of words) could recall the claim instead of knowing the fact. A frame's
    own word runs are shared by many prompts and do not join groups. run=0: every pair alone."""
    parent = list(range(len(pairs)))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    if run > 0:
        holders: dict[tuple, list[int]] = {}
        for i, (false, _) in enumerate(pairs):
            words = prompt_words(false["prompt"])
            for gram in {tuple(words[k : k + run]) for k in range(len(words) - run + 1)}:
                holders.setdefault(gram, []).append(i)
        for members in holders.values():
            if 1 < len(members) <= max_share:
                for i in members[1:]:
                    parent[root(i)] = root(members[0])
    roots = [root(i) for i in range(len(pairs))]
    index = {r: g for g, r in enumerate(dict.fromkeys(roots))}
    return np.array([index[r] for r in roots], dtype=np.int64)


def fold_of_groups(groups: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """Fold index (0..folds-1) of each pair, all pairs of a group in one fold: the groups from
    the largest down (a seeded shuffle among equal sizes), each placed in the fold with the
    fewest pairs so far."""
    names, sizes = np.unique(groups, return_counts=True)
    if len(names) < 2 * folds:
        raise DataError(
            f"{len(names)} independent groups of pairs are too few for {folds} folds "
            f"(need >= {2 * folds})"
        )
    shuffled = np.random.default_rng(seed).permutation(len(names))
    order = shuffled[np.argsort(-sizes[shuffled], kind="stable")]  # largest first, ties shuffled
    load = np.zeros(folds, dtype=np.int64)
    fold_of_name = {}
    for k in order:
        f = int(np.argmin(load))
        fold_of_name[names[k]] = f
        load[f] += sizes[k]
    return np.array([fold_of_name[g] for g in groups], dtype=np.int64)
