"""The README is a user's page (at most 300 lines) and every link in it and in docs/ resolves:
a file that exists and, for `page.md#anchor`, a heading there."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
README_MAX_LINES = 300


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {slug(m) for m in re.findall(r"^#{1,6} (.+)$", page.read_text(), re.M)}


def test_the_readme_is_a_page_a_user_reads() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, len(lines)
    text = "\n".join(lines)
    assert text.index("make demo") < text.index("## Install")  # the two commands come first
    for section in ("## Install", "## VS Code", "## Neovim", "## Settings", "## Models"):
        assert section in text
    for section in ("## GPU", "## Troubleshooting"):
        assert section in text


def test_every_link_resolves() -> None:
    broken = []
    for page in pages():
        for target in LINK.findall(page.read_text()):
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []


def test_every_docs_page_is_linked_from_the_readme() -> None:
    readme = (REPO / "README.md").read_text()
    orphans = [p.name for p in (REPO / "docs").glob("*.md") if f"(docs/{p.name})" not in readme]
    assert orphans == []
