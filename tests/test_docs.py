"""The documentation holds together: the README is short, every link and anchor in the Markdown files resolves,
nothing names a file the repository lacks, every CLI command has a row in docs/cli.md, and the TUI's help screen
names every docs page.

What a reader relies on: a link that goes somewhere, a page name that exists, and a README a newcomer reads
in five minutes. These checks read files only (no model, no measurement).
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".pytest_cache", "build", "dist"}
README_MAX_LINES = 250

# [text](target) and ![alt](target); the target ends at the first space or ")" (titles are not used here)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# a file name ending in .md, with an optional relative path before it (docs/, ../)
MD_NAME = re.compile(r"(?<![\w/.-])((?:\.\.?/)*(?:[\w.-]+/)*[\w.-]*\w\.md)\b(?!/)")
FENCE = re.compile(r"^(\s*)(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1)(?!\n\s*\n).)+?\1", re.DOTALL)


def _files(pattern: str) -> list[Path]:
    return sorted(p for p in ROOT.rglob(pattern)
                  if not any(part in SKIP_DIRS or part.startswith(".") for part in p.relative_to(ROOT).parts[:-1]))


def markdown_files() -> list[Path]:
    """Every Markdown file of the repository (README.md, docs/*.md, and any other), hidden and venv folders
    excluded."""
    return _files("*.md")


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of a Markdown text with fenced code blocks and inline code spans (which may run over
    a line break) blanked out."""
    lines, fence = [], None
    for line in text.splitlines():
        m = FENCE.match(line)
        if m:
            fence = None if fence == m.group(2) else (fence or m.group(2))
            lines.append("")
        else:
            lines.append("" if fence else line)
    prose = CODE_SPAN.sub(lambda m: "\n" * m.group(0).count("\n"), "\n".join(lines))
    return list(enumerate(prose.split("\n"), 1))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: inline markup dropped (code spans keep their text, links their
    label), lower case, every character but letters, digits, spaces, ``-`` and ``_`` removed, spaces to ``-``."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, with GitHub's ``-1``, ``-2`` suffixes for repeated headings."""
    seen: dict[str, int] = {}
    out = set()
    fence = None
    for line in path.read_text(encoding="utf-8").splitlines():
        m = FENCE.match(line)
        if m:
            fence = None if fence == m.group(2) else (fence or m.group(2))
            continue
        h = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fence is None and h:
            base = slug(h.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(path: Path) -> list[str]:
    """``file:line: target (why)`` for every relative link of a Markdown file that names a missing file or a
    heading its target lacks; web and mail links are not followed."""
    problems = []
    for no, line in _prose_lines(path.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(ROOT)}:{no}: {target}"
            if not dest.exists():
                problems.append(f"{where} (no such file)")
            elif not dest.is_relative_to(ROOT):
                problems.append(f"{where} (outside the repository)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(f"{where} (no heading with that anchor in {dest.relative_to(ROOT)})")
    return problems


def _exists(name: str, source: Path) -> bool:
    """A file name resolves from the file that names it, or from the repository root."""
    return any((base / name).resolve().is_file() for base in (source.parent, ROOT))


def md_names_in_python(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every ``*.md`` named in a Python file's comments and docstrings (every bare string
    statement). Other string literals are data (a test's output file under ``tmp_path``), not references."""
    text = path.read_text(encoding="utf-8")
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            found += [(tok.start[0], n) for n in MD_NAME.findall(tok.string)]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found += [(node.lineno, n) for n in MD_NAME.findall(node.value.value)]
    return found


def md_names_in_markdown(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every ``*.md`` named in a Markdown file's prose (code blocks and spans are commands and
    their output files, not references)."""
    return [(no, n) for no, line in _prose_lines(path.read_text(encoding="utf-8")) for n in MD_NAME.findall(line)]


def test_readme_is_what_a_newcomer_reads_in_five_minutes():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = readme.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines: move reference text to docs/"
    # the two commands: one that sets up and runs the demo, one that sets up and runs the tests
    assert "pip install -e . && sparsify-tui demo" in readme
    assert re.search(r"pip install -e \"\.\[test[^\"]*\]\" && python -m pytest", readme)
    # one screenshot table, the walk to a faster model within a budget, and the docs index
    assert re.search(r"\|\s*!\[[^\]]*\]\(screenshots/", readme)
    for step in ("sparsify-tui create", "sparsify-tui profile perf", "--structure channel --max-drop",
                 "sparsify-tui apply", "sparsify-tui benchmark"):
        assert step in readme, step
    assert "## Documentation" in readme


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in LINK.findall((ROOT / "README.md").read_text("utf-8"))}
    pages = _files("docs/*.md")
    assert pages, "docs/ holds the reference pages"
    assert [p.name for p in pages if p.resolve() not in linked] == []


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(path):
    assert broken_links(path) == []


def test_no_module_test_or_doc_names_a_file_the_repository_lacks():
    missing = []
    for path in _files("*.py"):
        missing += [f"{path.relative_to(ROOT)}:{no}: {n}" for no, n in md_names_in_python(path) if not _exists(n, path)]
    for path in markdown_files():
        missing += [f"{path.relative_to(ROOT)}:{no}: {n}" for no, n in md_names_in_markdown(path)
                    if not _exists(n, path)]
    for path in (ROOT / "pyproject.toml", ROOT / ".ci" / "run"):
        if path.exists():
            missing += [f"{path.relative_to(ROOT)}: {n}" for n in MD_NAME.findall(path.read_text("utf-8"))
                        if not _exists(n, path)]
    assert missing == []


def test_the_checks_catch_what_they_are_for(tmp_path, monkeypatch):
    """The link, anchor and file-name checks find a broken link, a missing anchor and a missing design page."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Two `words`: here\n")
    bad = tmp_path / "README.md"
    bad.write_text("[ok](docs/a.md#two-words-here) [gone](docs/b.md) [anchor](docs/a.md#nope) `[code](x.md)`\n"
                   "See DESIGN.md and docs/a.md.\n")
    assert [p.split(": ", 1)[1] for p in broken_links(bad)] == ["docs/b.md (no such file)",
                                                                "docs/a.md#nope (no heading with that anchor in "
                                                                "docs/a.md)"]
    assert [n for _no, n in md_names_in_markdown(bad) if not _exists(n, bad)] == ["docs/b.md", "DESIGN.md"]
    py = tmp_path / "m.py"
    py.write_text('"""Rules (DESIGN.md, Jobs)."""\nOUT = "r.md"  # see docs/a.md\n')
    assert md_names_in_python(py) == [(2, "docs/a.md"), (1, "DESIGN.md")]


def _cli_commands() -> list[str]:
    from sparsify_tui.cli import build_parser

    out = []

    def walk(parser, prefix):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    nested = any(isinstance(a, argparse._SubParsersAction) for a in sub._actions)
                    if not nested:
                        out.append(prefix + name)
                    walk(sub, prefix + name + " ")

    walk(build_parser(), "")
    return out


def test_every_cli_command_has_a_row_in_the_cli_reference():
    reference = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    commands = _cli_commands()
    assert "profile perf" in commands and "job log" in commands
    assert [c for c in commands if f"`sparsify-tui {c}`" not in reference] == []


def test_the_help_screen_names_every_docs_page():
    from sparsify_tui.tui.help.screen import DOC_PAGES, DOCS_LINE

    assert sorted(DOC_PAGES) == sorted(p.stem for p in _files("docs/*.md"))
    assert all(page in DOCS_LINE for page in DOC_PAGES) and "README.md" in DOCS_LINE and "docs/" in DOCS_LINE
