"""What every plot of a run says about itself: its title names the dataset, the model, the judge and the item
count, so a PNG that travels alone is still clear. Kit-free."""
from __future__ import annotations

from pathlib import Path


def new_figure(**kwargs):
    """A matplotlib Figure drawn by the Agg canvas, without pyplot: no process-wide figure registry or backend
    choice, and a lighter import. `kwargs` go to Figure (figsize, dpi)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def model_of_file(eval_file: str | Path, dataset: str) -> str:
    """The `<model>` of the kit's `<model>_<dataset>.<ext>` (else the file's stem)."""
    stem = Path(eval_file).stem
    suffix = f'_{dataset}'
    return stem[:-len(suffix)] if stem.endswith(suffix) and len(stem) > len(suffix) else stem


def run_title(dataset: str, model: str, judge: str, items: int, scored: int | None = None) -> str:
    """'GRAB_DEMO | model Naive-Baseline | judge: none (rule-based) | 41 items (40 scored)'."""
    count = f'{items} items' + (f' ({scored} scored)' if scored is not None and scored != items else '')
    return f'{dataset} | model {model} | judge: {judge} | {count}'


def no_plot_line(benchmark: str, path: str | Path, why: str) -> str:
    """The line printed instead of writing an empty figure."""
    return f'[{benchmark}] no plot {Path(path).name}: {why}'


def wrapped(title: str, width_inches: float, fontsize: float = 10) -> str:
    """The title broken into lines that fit a figure `width_inches` wide (about 0.55 x fontsize points per
    character), at word boundaries, so no part of it is cut off."""
    import textwrap
    chars = max(30, int(width_inches * 72 / (0.55 * fontsize)))
    return '\n'.join(textwrap.fill(line, chars) for line in title.splitlines())
