"""The documentation holds together: every relative link of README.md and docs/**/*.md leads to a file or folder
of the checkout, and CI runs the README's test command word for word.

A link is `[text](target)` or `![alt](target)` outside code (fenced blocks and `inline code` are text, not
links); a target with a scheme (https:, mailto:) or only an anchor is not checked, and an anchor after a path
is ignored (the file must exist, its headings are not read).
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

FENCED = re.compile(r"^(```|~~~)[^\n]*\n.*?^\1[^\n]*$", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def fenced_blocks(text: str) -> list[str]:
    """The fenced code blocks of a Markdown text, fences included."""
    return [m.group(0) for m in FENCED.finditer(text)]


def relative_links(text: str) -> list[str]:
    """The link targets of a Markdown text that name a path (anchors cut off), in order."""
    prose = INLINE_CODE.sub("", FENCED.sub("", text))
    targets = [unquote(m.group(1)) for m in LINK.finditer(prose)]
    return [t.split("#", 1)[0] for t in targets if not SCHEME.match(t) and not t.startswith("#")]


def test_link_reader_finds_links_and_skips_code() -> None:
    text = ("See [the guide](docs/a%20b.md#top), ![graph](img.png \"title\") and [site](https://x.org).\n"
            "`[not](a-link.md)` and [anchor](#here)\n```\n[also not](code.md)\n```\n[last](<c.md>)\n")
    assert relative_links(text) == ["docs/a b.md", "img.png", "c.md"]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    broken = [t for t in relative_links(doc.read_text(encoding="utf-8")) if not (doc.parent / t).exists()]
    assert not broken, f"{doc.relative_to(ROOT)} links to missing files: {broken}"


def test_ci_runs_the_readme_test_command() -> None:
    """The README's "Two commands" are what CI runs: the test command appears verbatim as a line of .ci/run."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    lines = [line for block in fenced_blocks(section) for line in block.splitlines()[1:-1]]
    install_run = [line for line in lines if "dlzero loop --config tiny" in line]
    test = [line for line in lines if "pytest" in line]
    assert len(install_run) == 1 and len(test) == 1, lines
    assert test[0] in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
