"""Real VS Code for the editor tests: code-server (VS Code in a browser) with the built .vsix
installed, driven through Debian's Chromium by Playwright. What a person sees is read from the
DOM: the ghost text VS Code draws, the status bar, notifications; what Tab inserted is read from
the file on disk."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
VSIX = REPO / "editors" / "vscode" / "fastcomplete.vsix"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# What a new user has, minus what makes a test flaky: no welcome page, no tips, no updates, no
# trust prompt, and word-based suggestions left on (they are the suggest widget people meet).
USER_SETTINGS: dict[str, Any] = {
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": False,
    "workbench.enableExperiments": False,
    "security.workspace.trust.enabled": False,
    "update.mode": "none",
    "extensions.autoCheckUpdates": False,
    "extensions.autoUpdate": False,
    "telemetry.telemetryLevel": "off",
    "files.autoSave": "off",
    "editor.accessibilitySupport": "off",
    "chat.disableAIFeatures": True,
}
GHOST = ".ghost-text-decoration, .ghost-text-decoration-preview, .ghost-text"


def wait_for(fn: Callable[[], Any], timeout: float = 60.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := fn():
            return value
        time.sleep(0.1)
    raise TimeoutError(f"gave up after {timeout} s waiting for {what or fn}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class CodeServer:
    url: str
    workspace: Path
    user_dir: Path
    log: Path


@contextmanager
def code_server(
    binary: Path, tmp: Path, workspace: Path, settings: dict[str, Any], env: dict[str, str]
) -> Iterator[CodeServer]:
    """code-server on a free loopback port with the .vsix installed into a private extensions
    folder and `settings` as the user's settings; stopped on exit."""
    user_dir, ext_dir = tmp / "user-data", tmp / "extensions"
    (user_dir / "User").mkdir(parents=True, exist_ok=True)
    (user_dir / "User" / "settings.json").write_text(json.dumps({**USER_SETTINGS, **settings}))
    common = ["--user-data-dir", str(user_dir), "--extensions-dir", str(ext_dir)]
    subprocess.run(
        [str(binary), *common, "--install-extension", str(VSIX)],
        check=True,
        capture_output=True,
        env=env,
        timeout=300,
    )
    port = free_port()
    log = tmp / "code-server.log"
    args = [
        str(binary),
        *common,
        "--auth",
        "none",
        "--bind-addr",
        f"127.0.0.1:{port}",
        "--disable-telemetry",
        "--disable-update-check",
        "--disable-workspace-trust",
        "--disable-getting-started-override",
        str(workspace),
    ]
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(f"{url}/healthz"), 120, "code-server to listen")
        yield CodeServer(f"{url}/?folder={workspace}", workspace, user_dir, log)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@contextmanager
def chromium() -> Iterator[Any]:
    """Headless Debian Chromium under Playwright. One per test module: Playwright's sync API
    runs an event loop on its thread, so a second one cannot start while the first lives."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def browser_page(browser: Any) -> Iterator[Any]:
    """A fresh 1280x800 page, clipboard allowed (Show Stats is read by copying it)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    try:
        yield context.new_page()
    finally:
        context.close()


def server_env(home: Path, extra_path: Path) -> dict[str, str]:
    """VS Code's environment: `extra_path` on PATH as a person's login shell puts it there
    (VS Code's server gives extensions the PATH of the login shell, not of the process that
    started it: what `uv tool update-shell` edits), in a user home of its own."""
    env = dict(os.environ)
    env["FASTCOMPLETE_HOME"] = str(home)
    env["PATH"] = f"{extra_path}{os.pathsep}{env.get('PATH', '')}"
    user_home = home.parent / "user-home"
    user_home.mkdir(parents=True, exist_ok=True)
    for profile in (".profile", ".bashrc"):
        (user_home / profile).write_text(f'export PATH="{extra_path}:$PATH"\n')
    env["HOME"], env["SHELL"] = str(user_home), "/bin/bash"
    env.pop("VSCODE_IPC_HOOK_CLI", None)
    return env


def venv_bin() -> Path:
    return Path(sys.executable).parent


def open_file(page: Any, name: str) -> None:
    """Quick Open (Ctrl+P) the workspace file `name`; returns with its editor focused."""
    for _ in range(3):  # the first Ctrl+P can land before the workbench takes keys
        page.keyboard.press("Control+p")
        try:
            page.wait_for_selector(".quick-input-widget input", state="visible", timeout=5000)
            break
        except Exception:
            continue
    page.keyboard.type(name)
    # The list filters as it is typed: Enter before that opens whatever was on top.
    row = page.locator(".quick-input-list .monaco-list-row.focused", has_text=name).first
    row.wait_for(state="visible", timeout=15000)
    page.keyboard.press("Enter")
    tab = page.locator(".tabs-container .tab.active", has_text=name)
    tab.wait_for(state="visible", timeout=15000)
    page.locator(".monaco-editor.focused").wait_for(state="visible", timeout=15000)
