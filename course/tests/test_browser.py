"""The course in JupyterLab, in a real browser, as a learner uses it: open a notebook with the course's kernel, run all
cells, look at what it shows. Headless Chromium through Playwright; skips with what to install when Chromium is missing.

Run alone with `pytest -m browser`; each test saves a screenshot of what the learner sees in _build/test-browser/
(ignored by git; pytest's temporary folders are pruned after three runs).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from browser import COURSE_KERNEL_DISPLAY, JupyterLab, chromium, require_chromium

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
PATCHES = "01_patches.ipynb"  # runs whole in about 20 s
TRAINING = "06_first_training.ipynb"  # the first training run: one tqdm.auto bar per run (vitlib.train)
VIEWPORT = {"width": 1280, "height": 900}

# the notebook's tab, found by its path in JupyterLab itself (window.jupyterapp)
PANEL = "Array.from(window.jupyterapp?.shell.widgets('main') ?? []).find(w => w.context?.path === path)"

# the notebook's state, read from JupyterLab's models and from what the page shows
NOTEBOOK_STATE = """path => {
  const panel = {PANEL};
  const kernel = panel.sessionContext.session?.kernel;
  return {
    kernel: panel.sessionContext.kernelDisplayName,
    toolbarKernel: panel.node.querySelector('.jp-KernelName')?.textContent?.trim() ?? null,
    status: kernel ? kernel.status : null,
    cells: panel.content.widgets.map(cell => {
      const model = cell.model;
      const area = cell.node.querySelector('.jp-OutputArea');
      return {
        type: model.type,
        source: model.sharedModel.getSource(),
        count: model.type === 'code' ? model.executionCount : null,
        outputs: model.type === 'code' ? model.outputs.toJSON() : [],
        text: area ? Array.from(area.querySelectorAll('.jp-OutputArea-output')).map(o => o.textContent).join('') : '',
        images: area ? Array.from(area.querySelectorAll('.jp-RenderedImage img'))
                            .filter(img => img.complete && img.naturalWidth > 0).length : 0,
        bars: area ? Array.from(area.querySelectorAll('.widget-hprogress .progress-bar'))
                          .map(bar => parseFloat(bar.style.width) || 0) : [],
      };
    }),
  };
}""".replace("{PANEL}", PANEL)

# every non-empty code cell has run and the kernel is idle, or a cell failed (the run stops there)
ALL_RUN_OR_FAILED = """path => {
  const panel = {PANEL};
  const kernel = panel?.sessionContext?.session?.kernel;
  if (!kernel) return false;
  const code = panel.content.widgets.filter(c => c.model.type === 'code' && c.model.sharedModel.getSource().trim());
  const failed = code.some(c => c.model.outputs.toJSON().some(o => o.output_type === 'error'));
  return failed || (kernel.status === 'idle' && code.every(c => c.model.executionCount !== null));
}""".replace("{PANEL}", PANEL)

# a progress bar has appeared, as a widget that moved or as text (tqdm without ipywidgets), or a cell failed
A_PROGRESS_BAR = """path => {
  const panel = {PANEL};
  if (!panel?.content) return false;
  const outputs = panel.content.widgets.flatMap(c => c.model.type === 'code' ? c.model.outputs.toJSON() : []);
  const moved = Array.from(panel.node.querySelectorAll('.widget-hprogress .progress-bar'))
                     .some(bar => parseFloat(bar.style.width) > 0);
  const textBar = o => o.output_type === 'stream' && [].concat(o.text).join('').includes('%|');
  return moved || outputs.some(o => o.output_type === 'error' || textBar(o));
}""".replace("{PANEL}", PANEL)

# the notebook's tab is open, in front, and its kernel idle
OPEN_AND_IDLE = """path => {
  const panel = {PANEL};
  return panel !== undefined && window.jupyterapp.shell.currentWidget === panel
         && panel.sessionContext?.session?.kernel?.status === 'idle';
}""".replace("{PANEL}", PANEL)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on copies of the two notebooks (it autosaves what it opens; the course's files stay as committed)."""
    require_chromium()
    base = tmp_path_factory.mktemp("jupyterlab")
    root = base / "notebooks"
    root.mkdir()
    for name in (PATCHES, TRAINING):
        shutil.copy2(NOTEBOOKS / name, root / name)
    server = JupyterLab(root, base / "home", base / "jupyterlab.log")
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def shots() -> Path:
    """The tests' output folder: the screenshots."""
    folder = ROOT / "_build" / "test-browser"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def browser(lab):
    with chromium() as browser:
        yield browser


def wait(page, lab, script: str, path: str, seconds: float, what: str) -> None:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(script, arg=path, timeout=seconds * 1000, polling=500)
    except PlaywrightTimeout:
        pytest.fail(f"{what}: not within {seconds:.0f} s. JupyterLab's log ends with:\n{lab.log_text()[-2000:]}")


def open_notebook(lab, browser, name: str):
    """A new tab on the notebook, on a session started with the course's kernel; returns the page once it is idle."""
    lab.start_session(name)
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(lab.lab_url(name))
    wait(page, lab, OPEN_AND_IDLE, name, 120, f"{name} open with an idle kernel")
    return page


def run_all_cells(page) -> None:
    """Run > Run All Cells, from the menu bar."""
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()


def show_cell(page, path: str, index: int, align: str = "start") -> None:
    """Scroll the notebook until cell `index` stays in view: cells off screen are laid out lazily, so one
    scrollIntoView lands where the cell was estimated to be; repeat until it stops moving."""
    page.evaluate(
        f"""async ([path, index, align]) => {{
      const node = {PANEL}.content.widgets[index].node;
      let last = null;
      for (let i = 0; i < 10; i++) {{
        node.scrollIntoView({{block: align}});
        await new Promise(done => setTimeout(done, 300));
        const top = node.getBoundingClientRect().top;
        if (last !== null && Math.abs(top - last) < 1) break;
        last = top;
      }}
    }}""",
        [path, index, align],
    )


def errors_in(state: dict) -> list[str]:
    return [
        f"cell {i}: {o['ename']}: {o['evalue']}\n{cell['source'][:300]}"
        for i, cell in enumerate(state["cells"])
        for o in cell["outputs"]
        if o["output_type"] == "error"
    ]


def committed_code_cells(name: str) -> list[dict]:
    return json.loads((NOTEBOOKS / name).read_text())["cells"]


def text_of(output: dict) -> str:
    """A stream's text (a string, or a list of lines as in .ipynb files)."""
    return "".join(output.get("text", ""))


def stdout_of(cell: dict) -> str:
    return "".join(
        text_of(o) for o in cell.get("outputs", []) if o["output_type"] == "stream" and o["name"] == "stdout"
    )


def test_patches_notebook_runs_whole_in_jupyterlab(lab, browser, shots):
    page = open_notebook(lab, browser, PATCHES)
    try:
        opened = page.evaluate(NOTEBOOK_STATE, PATCHES)
        assert opened["kernel"] == COURSE_KERNEL_DISPLAY, f"the notebook opened on {opened['kernel']!r}"
        assert opened["toolbarKernel"] == COURSE_KERNEL_DISPLAY, f"the toolbar shows {opened['toolbarKernel']!r}"
        run_all_cells(page)
        wait(page, lab, ALL_RUN_OR_FAILED, PATCHES, 300, f"{PATCHES}: every cell run and the kernel idle")
        state = page.evaluate(NOTEBOOK_STATE, PATCHES)
        # the picture: the figure with the most panels (the patches as a grid and as a sequence)
        figure = max(range(len(state["cells"])), key=lambda i: state["cells"][i]["images"])
        show_cell(page, PATCHES, figure)
        page.screenshot(path=shots / "01_patches.png")
    finally:
        page.close()
    print(f"screenshot: {shots / '01_patches.png'}")

    assert not errors_in(state), "cells failed in JupyterLab:\n" + "\n".join(errors_in(state))
    committed = committed_code_cells(PATCHES)
    assert len(state["cells"]) == len(committed), "JupyterLab shows another number of cells than the file holds"
    code = [c for c in state["cells"] if c["type"] == "code" and c["source"].strip()]
    assert code and all(c["count"] is not None for c in code), "some code cells did not run"

    figures = sum(1 for c in committed for o in c.get("outputs", []) if "image/png" in o.get("data", {}))
    shown = sum(c["images"] for c in state["cells"])
    assert figures > 0 and shown == figures, f"{shown} figures rendered as images, the notebook makes {figures}"

    checks = [i for i, c in enumerate(committed) if "".join(c["source"]).startswith("# NBVAL_CHECK_OUTPUT")]
    assert checks, f"{PATCHES} has no check cell"
    for i in checks:
        expected, got = stdout_of(committed[i]), state["cells"][i]["text"]
        assert expected.strip(), f"check cell {i} printed nothing in the committed notebook"
        assert got.split() == expected.split(), f"check cell {i} printed\n{got}\ninstead of\n{expected}"


def test_training_progress_bar_is_a_widget(lab, browser, shots):
    page = open_notebook(lab, browser, TRAINING)
    try:
        run_all_cells(page)
        wait(page, lab, A_PROGRESS_BAR, TRAINING, 240, f"{TRAINING}: a training progress bar")
        page.wait_for_timeout(1500)  # one more refresh of the bar (TQDM_MININTERVAL=1 s in the notebook)
        state = page.evaluate(NOTEBOOK_STATE, TRAINING)
        with_bar = [i for i, c in enumerate(state["cells"]) if c["bars"]]
        if with_bar:
            show_cell(page, TRAINING, with_bar[0], "center")
        page.screenshot(path=shots / "06_first_training.png")
        # the rest of the training is not needed: stop it, and the CPU is free again
        page.evaluate(f"path => {PANEL}.sessionContext.session.kernel.interrupt()", TRAINING)
    finally:
        page.close()
    print(f"screenshot: {shots / '06_first_training.png'}")

    assert not errors_in(state), "cells failed in JupyterLab:\n" + "\n".join(errors_in(state))
    training = [
        c
        for c in state["cells"]
        if c["bars"] or any(o["output_type"] == "stream" and "%|" in text_of(o) for o in c["outputs"])
    ]
    assert training, "no cell shows a progress bar"
    cell = training[0]
    assert "train(" in cell["source"], f"the bar is not the training's:\n{cell['source'][:300]}"
    text_bars = [text_of(o) for o in cell["outputs"] if o["output_type"] == "stream" and "%|" in text_of(o)]
    assert not text_bars, f"the progress bar was printed as text (ipywidgets missing in the kernel?):\n{text_bars[0]}"
    widgets = [
        o
        for o in cell["outputs"]
        if o["output_type"] == "display_data" and "application/vnd.jupyter.widget-view+json" in o["data"]
    ]
    assert widgets, f"the training cell shows no widget: {cell['outputs']}"
    assert "epoch 1/" in widgets[0]["data"]["text/plain"], widgets[0]["data"]["text/plain"]
    assert max(cell["bars"], default=0) > 0, "the widget bar rendered but never moved"
    assert "Error displaying widget" not in cell["text"], cell["text"]
