"""`make test` runs the suite as groups of folders, one pytest process each: every folder of
tests is in exactly one group, so none is left out of the suite or run twice."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def groups(makefile: str) -> list[list[str]]:
    line = re.search(r"^TEST_GROUPS := (.*)$", makefile, re.M)
    assert line is not None, "the Makefile declares no TEST_GROUPS"
    return [group.split() for group in re.findall(r'"([^"]*)"', line.group(1))]


def test_every_folder_of_tests_is_in_one_group() -> None:
    named = [folder for group in groups((REPO / "Makefile").read_text()) for folder in group]
    with_tests = {f"tests/{path.parent.relative_to(REPO / 'tests').parts[0]}"
                  for path in (REPO / "tests").rglob("test_*.py") if path.parent != REPO / "tests"}
    assert sorted(named) == sorted(set(named)), "a folder is in two groups"
    assert with_tests <= set(named), f"not in any group: {sorted(with_tests - set(named))}"
    assert all((REPO / folder).is_dir() for folder in named)


def test_the_groups_are_read_from_the_makefile_line() -> None:
    assert groups('TEST_GROUPS := "a b" "c"\n') == [["a", "b"], ["c"]]
