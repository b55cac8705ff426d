"""A small document model rendered both as Markdown and as self-contained HTML."""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .cube import STATUS_LABELS

_NON_OK_LABELS = {v: k for k, v in STATUS_LABELS.items() if k != "ok"}


@dataclass
class Document:
    title: str
    figure_dir: Path
    blocks: list = field(default_factory=list)
    figures: list = field(default_factory=list)   # paths of the PNG files written
    # The same figures as SVG, beside each PNG: vector graphics for papers and
    # slides, and text a reader can search (device keys, tags).
    vector_figures: list = field(default_factory=list)
    # (figure file, problem) for what would make a figure mislead (plots.check_figure:
    # overlapping labels, bars on a log axis): empty for every figure of plots.py.
    figure_problems: list = field(default_factory=list)

    def heading(self, text: str, level: int = 2):
        self.blocks.append(("h", level, text))

    def text(self, text: str):
        self.blocks.append(("p", text))

    def bullets(self, items: list[str]):
        if items:
            self.blocks.append(("ul", list(items)))

    def code(self, text: str):
        self.blocks.append(("pre", text))

    def table(self, df: pd.DataFrame, caption: str | None = None, collapsed: bool = False):
        self.blocks.append(("table", df.reset_index(drop=True), caption, collapsed))

    def figure(self, fig, name: str, caption: str):
        import matplotlib.pyplot as plt
        self.figure_dir.mkdir(parents=True, exist_ok=True)
        path = self.figure_dir / f"{_slug(name)}.png"
        n = 2
        while path in self.figures:
            path = self.figure_dir / f"{_slug(name)}-{n}.png"
            n += 1
        from .plots import check_figure
        self.figure_problems += [(path.name, problem) for problem in check_figure(fig)]
        fig.savefig(path, dpi=fig.dpi, facecolor="white")
        vector = path.with_suffix(".svg")
        fig.savefig(vector, facecolor="white")
        plt.close(fig)
        self.figures.append(path)
        self.vector_figures.append(vector)
        self.blocks.append(("fig", path, caption))
        return path

    # -- renderers ---------------------------------------------------------

    def markdown(self, base: Path) -> str:
        out = [f"# {self.title}", ""]
        for b in self.blocks:
            kind = b[0]
            if kind == "h":
                out += ["#" * b[1] + " " + b[2], ""]
            elif kind == "p":
                out += [b[1], ""]
            elif kind == "ul":
                out += [f"- {x}" for x in b[1]] + [""]
            elif kind == "pre":
                out += ["```", b[1].rstrip("\n"), "```", ""]
            elif kind == "table":
                _, df, caption, _ = b
                if caption:
                    out += [f"*{caption}*", ""]
                out += [_md_table(df), ""]
            elif kind == "fig":
                _, path, caption = b
                rel = path.relative_to(base) if path.is_relative_to(base) else path
                out += [f"![{caption}]({rel.as_posix()})", "",
                        f"*{caption}* ([SVG]({rel.with_suffix('.svg').as_posix()}))", ""]
        return "\n".join(out)

    def html(self) -> str:
        ids: dict[str, int] = {}

        def anchor(text):
            base = _slug(text)
            ids[base] = ids.get(base, 0) + 1
            return base if ids[base] == 1 else f"{base}-{ids[base]}"
        body = [f"<h1>{html.escape(self.title)}</h1>"]
        toc = [b for b in self.blocks if b[0] == "h" and b[1] == 2]
        if toc:
            body.append("<nav><ul>" + "".join(
                f'<li><a href="#{_slug(b[2])}">{html.escape(b[2])}</a></li>' for b in toc) + "</ul></nav>")
        for b in self.blocks:
            kind = b[0]
            if kind == "h":
                body.append(f'<h{b[1]} id="{anchor(b[2])}">{html.escape(b[2])}</h{b[1]}>')
            elif kind == "p":
                body.append(f"<p>{_inline(b[1])}</p>")
            elif kind == "ul":
                body.append("<ul>" + "".join(f"<li>{_inline(x)}</li>" for x in b[1]) + "</ul>")
            elif kind == "pre":
                body.append(f"<pre>{html.escape(b[1])}</pre>")
            elif kind == "table":
                _, df, caption, collapsed = b
                t = _html_table(df, caption)
                if collapsed:
                    t = f"<details><summary>{html.escape(caption or 'table')} ({len(df)} rows)</summary>{t}</details>"
                body.append(t)
            elif kind == "fig":
                _, path, caption = b
                data = base64.b64encode(path.read_bytes()).decode("ascii")
                svg = f"{path.parent.name}/{path.with_suffix('.svg').name}"
                body.append(f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
                            f'<figcaption>{_inline(caption)} (<a href="{html.escape(svg)}">SVG</a>)</figcaption></figure>')
        return _HTML.format(title=html.escape(self.title), body="\n".join(body))


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80] or "x"


def _inline(text: str) -> str:
    """Markdown's **bold** and `code` in HTML."""
    t = html.escape(text)
    t = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", t)
    t = re.sub(r"`(.+?)`", r"<code>\1</code>", t)
    return t


def _cell(v) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return ""
    return str(v)


def _md_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "(no rows)"
    cols = [str(c) for c in df.columns]
    esc = lambda s: _cell(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(esc(c) for c in cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(esc(v) for v in row) + " |")
    return "\n".join(lines)


def _status_class(text: str) -> str:
    for lab, st in _NON_OK_LABELS.items():
        if text == lab or text.startswith(lab + " ") or text.startswith(lab + ":") or text.startswith(lab + ";"):
            return f' class="st st-{st}"'
    return ""


def _html_table(df: pd.DataFrame, caption: str | None) -> str:
    if df.empty:
        return "<p><em>(no rows)</em></p>"
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    rows = []
    for row in df.itertuples(index=False):
        cells = []
        for v in row:
            s = _cell(v)
            cells.append(f"<td{_status_class(s)}>{html.escape(s)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    # Wide tables (the ranks table, the efficiency table) scroll inside their own box
    # instead of running off the page.
    return (f'<div class="wide"><table>{cap}<thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
            "</div>")


_HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1500px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.4; }}
h1 {{ border-bottom: 2px solid #444; }} h2 {{ border-bottom: 1px solid #aaa; margin-top: 2em; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }}
div.wide {{ max-width: 100%; overflow-x: auto; }}
caption {{ text-align: left; font-style: italic; padding: 0.3em 0; }}
th, td {{ border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }}
th {{ background: #f0f0f0; }}
td.st {{ font-weight: bold; }}
td.st-oom {{ background: #fde0e0; color: #a00; }}
td.st-unsupported {{ background: #eee; color: #555; }}
td.st-failed {{ background: #efe3f7; color: #63208a; }}
td.st-timeout {{ background: #fff0dd; color: #9a5200; }}
td.st-not_run {{ background: #f7f7f7; color: #888; }}
figure {{ margin: 1em 0 2em; }} figure img {{ max-width: 100%; border: 1px solid #ddd; }}
figcaption {{ font-style: italic; color: #444; }}
pre {{ background: #f6f6f6; padding: 0.6em; overflow-x: auto; font-size: 0.85em; }}
nav ul {{ columns: 2; }}
details {{ margin: 0.5em 0 1.5em; }} summary {{ cursor: pointer; font-style: italic; }}
</style></head>
<body>
{body}
</body></html>
"""
