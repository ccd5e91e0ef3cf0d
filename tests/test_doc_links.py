"""Every relative link of the README and docs/ reaches a file of the repository, and every
`#anchor` a heading of the page it names: the manual lives on several pages, and a section
moved from one to another must take its links along."""

import re
from pathlib import Path

import pytest

from .helpers import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE = re.compile(r"`[^`\n]*`")


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as
    hyphens, a repeated heading numbered."""
    seen: dict[str, int] = {}
    found = set()
    for line in FENCE.sub("", page.read_text()).splitlines():
        heading = re.match(r"#{1,6} (.+)", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading[1].strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if not count else f"{slug}-{count}")
    return found


def links(page: Path) -> list[str]:
    prose = CODE.sub("", FENCE.sub("", page.read_text()))
    return [t for t in LINK.findall(prose) if not re.match(r"[a-z]+:", t)]


def test_the_manual_has_pages_and_links():
    assert len(PAGES) > 2
    assert sum(len(links(page)) for page in PAGES) > 20


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path):
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or REPO not in (linked, *linked.parents):
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.relative_to(REPO)}")
    assert not broken, broken


def test_every_page_of_docs_is_linked_from_the_readme():
    readme = set(links(REPO / "README.md"))
    linked = {target.partition("#")[0] for target in readme}
    for page in PAGES[1:]:
        assert f"docs/{page.name}" in linked, f"the README links no docs/{page.name}"
