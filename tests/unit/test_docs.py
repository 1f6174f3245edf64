"""The documentation's shape: pages short enough to read, nothing dated, no commit named, and every
relative link landing on a file (and heading) that exists. Pure Python: reads Markdown files only.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = [README, *DOCS]

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]+`")
# A calendar date in prose: a measurement or an event ("the run of 2026-11-28"). Dates inside code
# (sample data, file names, command arguments) are data, not statements.
DATE = re.compile(r"\b(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])\b")
# A commit hash, even inside inline code ("commit `f479366`"): 7 to 40 hex digits, with a digit and
# a letter in it, so neither a number (1000000) nor a word (`decade`) counts.
HASH = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """The page without its fenced code blocks."""
    return FENCE.sub("", text)


def dated_statements(text: str) -> list[str]:
    return [m.group(0) for m in DATE.finditer(INLINE_CODE.sub("", prose(text)))]


def commit_hashes(text: str) -> list[str]:
    return HASH.findall(prose(text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    for line in prose(path.read_text()).splitlines():
        m = re.match(r"#{1,6}\s+(.*)", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        result.add(base if n == 0 else f"{base}-{n}")
    return result


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        missing_anchor = bool(anchor) and dest.suffix == ".md" and anchor not in anchors(dest)
        if not dest.exists() or missing_anchor:
            broken.append(target)
    return broken


def _name(path: Path) -> str:
    return str(path.relative_to(REPO))


def test_the_readme_fits_the_first_hour() -> None:
    assert len(README.read_text().splitlines()) <= 400


def test_the_performance_page_is_a_reference_not_a_log() -> None:
    assert len((REPO / "docs" / "performance.md").read_text().splitlines()) <= 150


@pytest.mark.parametrize("page", DOCS, ids=_name)
def test_no_reference_page_is_over_500_lines(page: Path) -> None:
    assert len(page.read_text().splitlines()) <= 500


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_nothing_is_dated_and_no_commit_is_named(page: Path) -> None:
    text = page.read_text()
    assert dated_statements(text) == []
    assert commit_hashes(text) == []


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_relative_link_lands(page: Path) -> None:
    assert broken_links(page) == []


def test_every_make_target_the_docs_name_exists() -> None:
    targets = set(re.findall(r"^([a-z0-9-]+):", (REPO / "Makefile").read_text(), re.M))
    named = set()
    for page in PAGES:
        text = page.read_text()
        code = [re.sub(r"#.*", "", snippet)  # a shell comment is prose
                for snippet in INLINE_CODE.findall(text) + [m.group(0) for m in FENCE.finditer(text)]]
        named |= {(page.name, target) for snippet in code
                  for target in re.findall(r"(?:^|[\s`&;(])make ([a-z][a-z0-9-]*)", snippet, re.M)}
    assert {(name, target) for name, target in named if target not in targets} == set()


def test_the_checks_catch_what_they_are_for() -> None:
    """Dated prose and named commits are caught; sample data in code is not."""
    page = ("The latest run (`make bench`, 2026-11-28, commit `f479366`) on 2 cores.\n"
            "Land `orders/2026-03-02.csv`, then `--from 2025-01-27`.\n"
            "```sh\nmedallion backfill gold --from 2025-01-27 --to 2025-01-28\n```\n"
            "1,000,000 rows, 1000000 events, a decade.\n")
    assert dated_statements(page) == ["2026-11-28"]
    assert commit_hashes(page) == ["f479366"]
    assert slug("S3: the lakehouse on object storage") == "s3-the-lakehouse-on-object-storage"
    assert slug("`sources.<name>`: where records arrive") == "sourcesname-where-records-arrive"
