"""bench/mutation_check.py: every planted bug still applies to today's code, and the machinery sees
a caught mutation as caught (one end to end). The full run is recorded in knowledge/grpo.md."""

import pytest

from bench import mutation_check as mc


@pytest.mark.parametrize("m", mc.MUTATIONS, ids=lambda m: m.name)
def test_each_mutation_applies_exactly_once_to_the_current_code(m, tmp_path):
    target = tmp_path / m.path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text((mc.ROOT / m.path).read_text())
    mc.apply(m, tmp_path)
    assert m.new in target.read_text() and m.old not in target.read_text().replace(m.new, "")
    assert all((mc.ROOT / t).is_file() for t in m.tests)


def test_apply_refuses_lines_that_moved(tmp_path):
    m = mc.MUTATIONS[0]
    (tmp_path / m.path).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / m.path).write_text("nothing to mutate here\n")
    with pytest.raises(ValueError, match="occurs 0 times"):
        mc.apply(m, tmp_path)


def test_kl_sign_flip_is_caught_end_to_end():
    (m,) = [m for m in mc.MUTATIONS if m.name == "kl_sign_flipped"]
    result = mc.run_mutation(m)
    assert result["caught"] and result["pytest_exit"] == 1, result
    assert any("test_grpo.py" in t for t in result["failed_tests"])


def test_unknown_mutation_is_one_error_line(capsys):
    assert mc.main(["--only", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --only 'nope'") and err.count("\n") == 1
