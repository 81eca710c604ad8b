"""Every numeric or listed option is checked by its one declaration (`cli.options.whole`, `number`,
`target_field`) before any work: a hostile value is argparse's one error line and exit 2 — never a
traceback, never a value that reaches `islice`, the planner or the sweep's records (issue 54)."""

from __future__ import annotations

import pytest

from neuronforge.interfaces.cli import main

HOSTILE_NUMBERS = ["", "-1", "0", "99999999999999999999", "9" * 5000, "abc", "²", "٣", "1e3", "nan", "inf", "\x00"]

OPTIONS = {
    ("lease", "ls", "--limit"): [],
    ("ls", "--limit"): [],
    ("ls", "--offset"): ["0"],
    ("store", "ls", "--limit"): [],
    ("verify", "--repair", "--page-size"): [],
    ("verify", "--repair", "--pages"): [],
    ("gc", "--keep-compilers"): [],
    ("sweep", "--model", "x", "--instance", "inf2.xlarge", "--out", "o", "--tp"): [],
    ("sweep", "--model", "x", "--instance", "inf2.xlarge", "--out", "o", "--batch-sizes"): [],
    ("sweep", "--model", "x", "--instance", "inf2.xlarge", "--out", "o", "--seq-lens"): ["4"],
}


@pytest.mark.parametrize("argv", OPTIONS, ids=lambda a: " ".join(a[:1] + a[-1:]))
def test_a_hostile_number_is_one_error_line_and_exit_2(argv: tuple[str, ...], capsys) -> None:
    for value in HOSTILE_NUMBERS:
        if value in OPTIONS[argv] or (value == "0" and argv[-1] == "--offset"):
            continue
        with pytest.raises(SystemExit) as ended:
            main([*argv, value])
        err = capsys.readouterr().err
        assert ended.value.code == 2, (argv, value)
        errors = [line for line in err.splitlines() if ": error: " in line]
        assert len(errors) == 1 and argv[-1] in errors[0] and "Traceback" not in err, (argv, value, err)


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--seq-lens", "4", "greater than or equal to 8 (sequence_length)"),
        ("--dtype", "fp64", "'bf16', 'fp16' or 'fp32' (dtype)"),
        ("--planner-margin", "nan", "is not a number above 0"),
        ("--planner-margin", "-1", "is not a number above 0"),
        ("--planner-margin", "1e308", "at most 100"),
    ],
)
def test_the_sweeps_lists_are_checked_item_by_item_by_the_targets_rule(option: str, value: str, said: str, capsys):
    with pytest.raises(SystemExit) as ended:
        main(["sweep", "--model", "x", "--instance", "inf2.xlarge", "--out", "o", option, value])
    assert ended.value.code == 2 and said in capsys.readouterr().err
