"""Every relative link of README.md and docs/*.md resolves: the file or folder exists, and a `#section` names a
heading of the file it points to (GitHub's anchors). Moving a module or a result folder breaks no page."""
import re
from pathlib import Path

from conftest import REPO

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of a markdown file's headings."""
    found = set()
    for line in re.sub(r"```.*?```", "", page.read_text(), flags=re.S).splitlines():
        if m := re.match(r"#{1,6}\s+(.*)", line):
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            found.add(slug)
    return found


def broken_links(page: Path) -> list[str]:
    text = re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", page.read_text(), flags=re.S))  # code holds no links
    wrong = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # https:, mailto:, file:
            continue
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists():
            wrong.append(f"{target}: no {where.relative_to(REPO) if where.is_relative_to(REPO) else where}")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            wrong.append(f"{target}: no heading #{anchor} in {where.name}")
    return wrong


def test_every_relative_link_of_the_readme_and_the_docs_resolves():
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    assert len(pages) > 5
    wrong = {page.name: broken for page in pages if (broken := broken_links(page))}
    assert wrong == {}


def test_a_missing_file_or_heading_is_found(tmp_path, monkeypatch):
    monkeypatch.setattr(__import__(__name__), "REPO", tmp_path)
    (tmp_path / "a.md").write_text("# A page\n\n## Sizes on the CPU\n")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md) [ok](a.md#sizes-on-the-cpu) [web](https://x.org/y) [here](#b)\n# B\n"
                    "![gone](gone.png) [moved](a.md#sizes) `[not a link](x.md)`\n```\n[in code](nowhere.md)\n```\n")
    assert broken_links(page) == ["gone.png: no gone.png", "a.md#sizes: no heading #sizes in a.md"]
    page.write_text("```\n# Not a heading\n```\n[code](#not-a-heading)\n")
    assert broken_links(page) == ["#not-a-heading: no heading #not-a-heading in b.md"]
