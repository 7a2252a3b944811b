"""The README and docs/ hold together: every relative link and #anchor resolves, the README stays
short, and no doc but docs/results.md and docs/history/ names a commit. Pure text: no model, no network."""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_MAX_LINES = 250
# The docs that may name commits: the current figures and every run before them (docs/history/),
# each with its date, machine and command.
RESULTS = DOCS / "results.md"
HISTORY = DOCS / "history"


def names_commits_freely(path: Path) -> bool:
    return path == RESULTS or path.is_relative_to(HISTORY)


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in paths]


FENCE = re.compile(r"^ {0,3}(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
# [text](target) and ![alt](target), with an optional "title"; the text may hold one level of [].
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced and indented code blocks, where links and
    headings live."""
    out: list[tuple[int, str]] = []
    fenced = indented = False
    previous_blank = True
    for number, line in enumerate(text.splitlines(), 1):
        blank = not line.strip()
        if fenced:
            fenced = not FENCE.match(line)
        elif FENCE.match(line):
            fenced = True
        elif indented and (blank or line.startswith(("    ", "\t"))):
            pass  # an indented code block runs until a line that is neither blank nor indented
        elif previous_blank and line.startswith(("    ", "\t")):
            indented = True
        else:
            indented = False
            out.append((number, line))
        previous_blank = blank
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its rendered text, lower-cased, with everything but letters,
    marks, digits, connector punctuation, spaces and hyphens dropped, and spaces made hyphens."""
    text = INLINE_CODE.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text only
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("*", "")  # emphasis markers (underscores are kept, as GitHub keeps them)
    kept = [
        c for c in text.strip().lower() if c in " -" or unicodedata.category(c)[0] in "LMN" or unicodedata.category(c) == "Pc"
    ]
    return "".join(kept).replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """Every anchor a markdown file offers: its headings' slugs (repeats numbered -1, -2, ... as
    GitHub numbers them) and explicit <a name/id> anchors."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        found.update(HTML_ANCHOR.findall(line))
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return frozenset(found)


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every link in the file's prose, inline code left out."""
    return [
        (number, m.group(1))
        for number, line in prose_lines(path.read_text(encoding="utf-8"))
        for m in LINK.finditer(INLINE_CODE.sub("", line))
    ]


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def is_external(target: str) -> bool:
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target)) or target.startswith("//")


def broken_links(path: Path) -> list[str]:
    problems = []
    for number, target in links(path):
        if is_external(target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        where = f"{shown(path)}:{number}: {target}"
        if not dest.exists():
            problems.append(f"{where}: no such file")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            problems.append(f"{where}: no heading with anchor #{anchor} in {shown(dest)}")
    return problems


def test_the_checker_reads_links_and_anchors_as_github_does(tmp_path):
    assert slug("Downstream experiments (paper Tables 2–4)") == "downstream-experiments-paper-tables-24"
    assert slug("Error analysis over a file of texts (`marginal scan`)") == ("error-analysis-over-a-file-of-texts-marginal-scan")
    assert slug("Gemma 3 and the Q&A answers, beside genlm-bytes (issue 21's target, settled)") == (
        "gemma-3-and-the-qa-answers-beside-genlm-bytes-issue-21s-target-settled"
    )
    assert slug("`__init__.py` and **bold**") == "__init__py-and-bold"
    doc = tmp_path / "a.md"
    (tmp_path / "b.md").write_text("# Title\n\n## Part\n\n## Part\n")
    doc.write_text(
        "# A\n\n[ok](b.md#part-1) [self](#a) `[code](nowhere.md)` [web](https://example.org/x)\n\n"
        "    [indented code](nowhere.md)\n\n```\n[fenced](nowhere.md)\n# not a heading\n```\n\n"
        "[bad file](missing.md) [bad anchor](b.md#part-2)\n"
    )
    assert anchors(tmp_path / "b.md") == {"title", "part", "part-1"}
    problems = broken_links(doc)
    assert len(problems) == 2 and "missing.md" in problems[0] and "#part-2" in problems[1]


@pytest.mark.parametrize("path", markdown_files(), ids=_ids(markdown_files()))
def test_every_relative_link_and_anchor_resolves(path):
    assert broken_links(path) == []


def test_readme_is_short():
    n = len(README.read_text(encoding="utf-8").splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines; move detail into docs/ (at most {README_MAX_LINES})"


def test_readme_keeps_the_two_commands_and_points_to_every_doc():
    text = README.read_text(encoding="utf-8")
    assert "make app" in text and "make test" in text
    linked = {target.partition("#")[0] for _, target in links(README)}
    for doc in sorted(DOCS.glob("*.md")):
        if doc.name != "README.md":
            assert f"docs/{doc.name}" in linked, f"README.md does not link {doc.relative_to(ROOT)}"


HEX = re.compile(r"^[0-9a-f]{7,40}$")
WORD = re.compile(r"[A-Za-z0-9]+")


def commits_named(text: str) -> list[str]:
    """Hex tokens of 7 to 40 characters (with a digit and a letter, as a hash has) within three
    words of the word "commit" (commits, commit's)."""
    words = WORD.findall(text)
    found = []
    for i, word in enumerate(words):
        w = word.lower()
        if HEX.match(w) and re.search(r"[0-9]", w) and re.search(r"[a-f]", w):
            near = words[max(0, i - 3) : i + 4]
            if any(n.lower().startswith("commit") for n in near):
                found.append(word)
    return found


def test_the_commit_check_finds_hashes_beside_the_word():
    assert commits_named("the code of commit 50f919a, whose") == ["50f919a"]
    assert commits_named("ae34d6b's commit reports") == ["ae34d6b"]
    assert commits_named("(commit after d540c0e with W = 32") == ["d540c0e"]
    assert commits_named("committed with their outputs; run 5c57e9c4: first result") == []
    assert commits_named("a cafe of 1234567 people committed") == []


@pytest.mark.parametrize(
    "path",
    [p for p in markdown_files() if not names_commits_freely(p)],
    ids=_ids([p for p in markdown_files() if not names_commits_freely(p)]),
)
def test_no_doc_but_results_names_a_commit(path):
    assert commits_named(path.read_text(encoding="utf-8")) == [], (
        f"{path.relative_to(ROOT)} names a commit: move the sentence to docs/results.md or docs/history/, or drop the hash"
    )
