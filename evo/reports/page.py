"""The one HTML and plot helper of the reports (a run's report.html, a bench's or a multirun's combined page): the
jinja2 templates in evo/reports/templates (``base.html.j2`` the shared head, style and layout, ``macros.html.j2``
tables, inline plots and notes, a template per page) rendered with autoescape on, so problem names and kernel source are
escaped; a page is self-contained (inline CSS, plots as base64 PNG, no server, no external URL). The Python side
gives the templates data alone. Also matplotlib figures turned into PNG bytes."""
from __future__ import annotations

import base64
import functools
import importlib.resources
import io
import logging
from pathlib import Path
from typing import NamedTuple

import jinja2
import markupsafe

TEMPLATES = Path(str(importlib.resources.files("evo.reports") / "templates"))  # this package's data folder


class Raw(str):
    """HTML already made (a table, an image from this module): written into a page as it is, never escaped again."""

    def __html__(self) -> str:
        return self


class Link(NamedTuple):
    """A table cell that links to another page (`href` relative to the page)."""
    href: str
    text: str


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters["b64"] = lambda data: base64.b64encode(data).decode()
    env.tests["link"] = lambda value: isinstance(value, Link)
    return env


def render(template: str, **data) -> str:
    """A page of evo/reports/templates drawn from `data`."""
    return environment().get_template(template).render(**data)


def _macro(name: str, *args) -> Raw:
    return Raw(getattr(environment().get_template("macros.html.j2").module, name)(*args))


def esc(text) -> str:
    """Text (kernel source included) as HTML: `<`, `>`, `&` and quotes escaped; Raw passes as it is."""
    return str(markupsafe.escape(text))


def link(href: str, text: str) -> Link:
    return Link(href, text)


def table(header, rows) -> Raw:
    """A table; a cell is text (escaped), a Link or Raw HTML."""
    return _macro("table", header, rows)


def png_img(png: bytes, alt: str) -> Raw:
    """A PNG embedded in the page (a data: URI): the page stays one file."""
    return _macro("img", png, alt)


def page(title: str, sections: list) -> str:
    """A whole page: a title and sections, each (heading or None, Raw HTML or text)."""
    return render("sections.html.j2", title=title, sections=sections)


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend (no display needed)."""
    import matplotlib

    logging.getLogger("matplotlib").setLevel(logging.WARNING)  # not its font-cache notes in a run's output
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_png(fig, dpi: int = 110) -> bytes:
    """The figure as PNG bytes; the figure is closed."""
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=dpi)
    pyplot().close(fig)
    return buffer.getvalue()
