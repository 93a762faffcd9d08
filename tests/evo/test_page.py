"""The shared page helper (evo/reports/page.py) and its jinja2 templates: text (a problem's name, kernel source) is
escaped, HTML the helpers made is not escaped twice, a table cell may link to a run's report, a plot is inline (the page
is one file), and the templates ship with the package (pyproject's package-data)."""
import base64
import fnmatch
import re

import pytest

from conftest import REPO
from evo.reports.page import TEMPLATES, Link, Raw, esc, page, png_img, table

PNG = b"\x89PNG\r\n"


def test_text_is_escaped_once_and_helpers_html_passes_as_it_is():
    name = "soft<max> & 'x' \"y\""
    html = page(f"run: {name}", [(f"h<{name}>", table(("problem", "report"), [[name, Link("runs/a b.html", name)]])),
                                 (None, Raw(f"<p class='note'>{esc(name)}</p>")), ("plot", png_img(PNG, name))])
    assert "<" + "max>" not in html and html.count(esc(name)) == 7  # title, h1, h2, cell, link, note, alt
    assert f"<td><a href='runs/a b.html'>{esc(name)}</a></td>" in html
    assert f"<h2>h&lt;{esc(name)}&gt;</h2>" in html and "&amp;lt;" not in html  # never escaped twice
    assert f"<img alt='{esc(name)}' src='data:image/png;base64,{base64.b64encode(PNG).decode()}'>" in html
    assert html.startswith("<!doctype html>") and "<style>" in html and html.endswith("</html>\n")
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", html)  # nothing fetched from elsewhere


def test_the_templates_ship_with_the_package():
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert any(dep.startswith("jinja2") for dep in config["project"]["dependencies"])
    setuptools = config["tool"]["setuptools"]
    assert any(fnmatch.fnmatch("evo", pattern) for pattern in setuptools["packages"]["find"]["include"])
    assert setuptools["packages"]["find"].get("namespaces", True)  # evo/reports/templates, without an __init__.py
    shipped = setuptools["package-data"]["*"]
    templates = sorted(TEMPLATES.iterdir())
    assert templates and all(any(fnmatch.fnmatch(t.name, p) for p in shipped) for t in templates)
