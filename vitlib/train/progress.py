"""The run's progress bar: `tqdm.auto` (a widget in a notebook, text in a terminal), one bar for the whole run.

In a notebook the widget's saved text is the state it was displayed in ("0/560"), so a notebook executed by papermill
and saved would show a bar frozen at 0% to anyone who reads it without the live widget. The bar is therefore
displayed under a display id and updated when it closes: the saved output then holds the finished bar.
"""

from __future__ import annotations

from tqdm.auto import tqdm


def progress_bar(**options) -> tqdm:
    """A tqdm bar (options as tqdm's); close it with `close_bar`."""
    try:
        from tqdm.notebook import tqdm as notebook_tqdm
    except ImportError:  # no IPython: a text bar
        notebook_tqdm = None
    if notebook_tqdm is None or not issubclass(tqdm, notebook_tqdm) or options.get("disable"):
        return tqdm(**options)
    from IPython.display import display

    bar = tqdm(display=False, **options)
    bar.display_handle = display(bar.container, display_id=True)
    return bar


def close_bar(bar: tqdm) -> None:
    """Close the bar; in a notebook, replace its displayed output with the final state."""
    bar.close()
    handle = getattr(bar, "display_handle", None)
    if handle is not None:
        handle.update(bar.container)
