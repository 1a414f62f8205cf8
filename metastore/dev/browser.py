"""The browser the console's tests drive: Debian's Chromium, installed once by the test set-up
(``python3 -m metastore.dev.browser``, standard library only, as root or with sudo), since no
browser may be downloaded by a test tool. Playwright drives it through ``executable_path``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

PACKAGES = ("chromium",)
FLAGS = ("--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")
"""Chromium's flags for a machine without internet: without the background-networking ones it
keeps opening connections the network refuses."""


def chromium() -> str | None:
    """The Chromium executable, if installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def install() -> int:
    """Install Chromium with apt (refreshing the package lists if the first try fails)."""
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    command = [*sudo, "apt-get", "install", "-y", "--no-install-recommends", *PACKAGES]
    if _apt(command) == 0:
        return 0
    _apt([*sudo, "apt-get", "update"])
    return _apt(command)


def _apt(command: list[str]) -> int:
    return subprocess.run(command, stdout=subprocess.DEVNULL, check=False,
                          env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}).returncode


def main() -> int:
    if chromium() is not None:
        return 0
    print("[bootstrap] installing Debian's Chromium for the console's browser tests",
          flush=True)
    code = install()
    if code != 0 or chromium() is None:
        print("[bootstrap] Chromium could not be installed (apt-get install chromium, as root)",
              file=sys.stderr, flush=True)
        return code or 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
