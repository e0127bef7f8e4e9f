"""Headless Chromium for the tests (JupyterLab and the website), and JupyterLab started as a learner starts it.

Playwright drives the system's Chromium (Debian: `apt-get install chromium`); Playwright's own browser download is not
needed. Without Chromium or Playwright the tests that need them skip and say how to install them.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Playwright adds --headless and a fresh profile (user-data-dir) of its own; these keep Chromium off the network
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
INSTALL_HINT = (
    "install Chromium (Debian/Ubuntu: `sudo apt-get install chromium`; .ci/run does it) or point $CHROMIUM "
    "at a Chrome/Chromium binary"
)
COURSE_KERNEL = "vit-course"
COURSE_KERNEL_DISPLAY = "Python (ViT course)"


def find_chromium() -> str | None:
    """$CHROMIUM, else the first Chromium/Chrome on PATH."""
    if os.environ.get("CHROMIUM"):
        return os.environ["CHROMIUM"] if Path(os.environ["CHROMIUM"]).exists() else None
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


def require_chromium() -> str:
    """The Chromium binary, or skip the test with what to install."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("Playwright for Python is missing: pip install -e '.[dev]' (or make setup)")
    path = find_chromium()
    if path is None:
        where = (
            f"$CHROMIUM={os.environ['CHROMIUM']} does not exist" if os.environ.get("CHROMIUM") else "no Chromium found"
        )
        pytest.skip(f"{where}: {INSTALL_HINT}")
    return path


@contextmanager
def chromium():
    """A headless Chromium (Playwright Browser), closed afterwards."""
    from playwright.sync_api import sync_playwright

    path = require_chromium()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, args=CHROMIUM_FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterLab:
    """JupyterLab of this Python environment on 127.0.0.1, with a token and throw-away config, runtime, settings and
    workspace folders under `home`; stopped, with its kernels, by `stop()` (its own process group)."""

    def __init__(self, root: Path, home: Path, log: Path):
        self.root, self.home, self.log_path = root, home, log
        self.token = secrets.token_hex(16)
        self.port = 0
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def environment(self) -> dict:
        folders = {name: self.home / name for name in ("config", "runtime", "settings", "workspaces", "ipython")}
        for folder in folders.values():
            folder.mkdir(parents=True, exist_ok=True)
        # no "would you like to get Jupyter news?" pop-up, no update check: the notification settings of a learner
        # who answered "never"
        notification = folders["settings"] / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
        notification.parent.mkdir(parents=True, exist_ok=True)
        notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "JPY_"))}
        env.update(
            JUPYTER_CONFIG_DIR=str(folders["config"]),
            JUPYTER_RUNTIME_DIR=str(folders["runtime"]),
            JUPYTERLAB_SETTINGS_DIR=str(folders["settings"]),
            JUPYTERLAB_WORKSPACES_DIR=str(folders["workspaces"]),
            IPYTHONDIR=str(folders["ipython"]),
            OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"),
            PYDEVD_DISABLE_FILE_VALIDATION="1",
        )
        return env

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={self.port}",
            "--port-retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            f"--LabApp.user_settings_dir={self.home / 'settings'}",
            f"--LabApp.workspaces_dir={self.home / 'workspaces'}",
            "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: the test reads the notebook's state
        ] + (["--allow-root"] if os.geteuid() == 0 else [])

    def start(self, timeout: float = 90.0, tries: int = 3) -> JupyterLab:
        env = self.environment()
        for _ in range(tries):  # a free port can be taken between the check and the bind: then try another
            self.port = free_port()
            self.log = open(self.log_path, "ab")
            self.process = subprocess.Popen(
                self.command(),
                cwd=self.root,
                env=env,
                stdout=self.log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.process.poll() is None:
                try:
                    self.api("GET", "/api/status")
                    return self
                except (urllib.error.URLError, ConnectionError, OSError):
                    time.sleep(0.3)
            code = self.process.poll()
            self.stop()
            if code is None:
                raise RuntimeError(f"JupyterLab did not answer in {timeout:.0f} s; its log:\n{self.log_text()[-3000:]}")
            if "already in use" not in self.log_text():
                raise RuntimeError(f"JupyterLab stopped (exit {code}); its log:\n{self.log_text()[-3000:]}")
        raise RuntimeError(f"JupyterLab found no free port in {tries} tries; its log:\n{self.log_text()[-3000:]}")

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def api(self, method: str, path: str, body: dict | None = None):
        request = urllib.request.Request(
            self.url + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read()
        return json.loads(text) if text else None

    def start_session(self, notebook: str, kernel: str = COURSE_KERNEL) -> dict:
        """Start the notebook's kernel (the course's, not the `python3` of its metadata), as the kernel picker would:
        JupyterLab then opens the notebook on this session."""
        specs = self.api("GET", "/api/kernelspecs")["kernelspecs"]
        if kernel not in specs:
            raise RuntimeError(
                f"the course's kernel {kernel!r} is not registered in this environment (found "
                f"{sorted(specs)}): run `make setup`"
            )
        return self.api(
            "POST",
            "/api/sessions",
            {"path": notebook, "type": "notebook", "name": notebook, "kernel": {"name": kernel}},
        )

    def lab_url(self, notebook: str) -> str:
        return f"{self.url}/lab/tree/{notebook}?reset&token={self.token}"  # reset: only this notebook, no other tab

    def stop(self) -> None:
        """Shut the kernels down through the server (they run in sessions of their own), then SIGTERM to the server's
        own process group and SIGKILL after 20 s."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            try:
                for kernel in self.api("GET", "/api/kernels"):
                    self.api("DELETE", f"/api/kernels/{kernel['id']}")
            except (urllib.error.URLError, OSError, ValueError):
                pass  # the server is going anyway: it stops its kernels on SIGTERM too
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
            except ProcessLookupError:
                pass
        if getattr(self, "log", None) is not None:
            self.log.close()
