"""The one HTML and plot helper of the reports (a run's report.html, a bench's or a multirun's combined page): a
self-contained page (inline CSS, plots as base64 PNG, no server, no external URL), escaped tables and text, and
matplotlib figures turned into PNG bytes."""
from __future__ import annotations

import base64
import html
import io
import logging

CSS = """body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left;
vertical-align:top}th{background:#f4f4f4}
pre{background:#f7f7f7;padding:.6em;overflow-x:auto;font-size:.85em;line-height:1.3}
.add{background:#e6ffec}.del{background:#ffebe9}.hunk{color:#6f42c1}.note{color:#666;font-size:.9em}
ul.tree,ul.tree ul{list-style:none;padding-left:1.4em;margin:0}ul.tree li{position:relative;margin:.25em 0}
ul.tree ul li:before{content:'';position:absolute;left:-1em;top:-.3em;width:.8em;height:.9em;
border-left:1px solid #999;border-bottom:1px solid #999}.edge{color:#0b6e4f;font-size:.9em}
code{background:#f4f4f4;padding:0 3px}"""


class Raw(str):
    """HTML already made (a link, a nested list): written into a page as it is, never escaped again."""


def esc(text) -> str:
    """Text (kernel source included) as HTML: `<`, `>`, `&` and quotes escaped; Raw passes as it is."""
    return text if isinstance(text, Raw) else html.escape(str(text), quote=True)


def link(href: str, text: str) -> Raw:
    return Raw(f"<a href='{esc(href)}'>{esc(text)}</a>")


def table(header, rows) -> Raw:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return Raw(f"<table><tr>{head}</tr>{body}</table>")


def png_img(png: bytes, alt: str) -> Raw:
    """A PNG embedded in the page (a data: URI): the page stays one file."""
    return Raw(f"<img alt='{esc(alt)}' src='data:image/png;base64,{base64.b64encode(png).decode()}'>")


def page(title: str, sections: list) -> str:
    """A whole page: a title and sections, each (heading or None, Raw HTML or text)."""
    body = "".join((f"<h2>{esc(heading)}</h2>" if heading else "") + esc(content) for heading, content in sections)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}</title><style>{CSS}</style>"
            f"</head><body><h1>{esc(title)}</h1>{body}</body></html>\n")


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
