"""Set up a fresh checkout and run its main job or its tests: ``python3 -m integration.bootstrap``.

Standard library only, so it runs before anything is installed. It creates ``.venv`` (or
``$METASTORE_VENV``), installs the project with its dev extras when pyproject.toml changed, resolves
the Kafka and Spark connector jars from Maven Central (once), then runs:

- ``demo``: the main job (local Kafka and a demo of the metastore);
- ``test``: ruff, mypy and the whole test suite against real Kafka (and Spark).

Extra arguments after the job name go to the job (for ``test``: to pytest).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def say(message: str) -> None:
    print(f"[bootstrap] {message}", flush=True)


def venv_dir() -> Path:
    return Path(os.environ.get("METASTORE_VENV", ROOT / ".venv"))


def ensure_venv() -> Path:
    venv = venv_dir()
    python = venv / "bin" / "python"
    if not python.exists():
        say(f"creating a virtualenv in {venv}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    stamp = venv / ".metastore-installed"
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if not stamp.exists() or stamp.read_text() != wanted:
        say("installing the project and its dependencies (first run: about a minute)")
        started = time.monotonic()
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
                       check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[dev]"],
                       check=True, cwd=ROOT)
        stamp.write_text(wanted)
        say(f"installed in {time.monotonic() - started:.0f}s")
    return venv


def run(argv: list[str]) -> int:
    if not argv or argv[0] not in ("demo", "test"):
        print("usage: python3 -m integration.bootstrap demo|test [args...]", file=sys.stderr)
        return 2
    job, extra = argv[0], argv[1:]
    venv = ensure_venv()
    bin_dir = venv / "bin"
    fetched = subprocess.run([str(bin_dir / "metastore"), "dev", "fetch"], cwd=ROOT, check=False)
    if fetched.returncode != 0:
        return fetched.returncode
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    if job == "demo":
        return subprocess.run([str(bin_dir / "metastore"), "dev", "demo", *extra],
                              cwd=ROOT, env=env, check=False).returncode
    steps = [
        ("ruff", [str(bin_dir / "ruff"), "check", "."]),
        ("mypy", [str(bin_dir / "mypy")]),
        ("pytest", [str(bin_dir / "python"), "-m", "pytest",
                    *(extra or ["tests", "integration", "--durations=25"])]),
    ]
    for name, command in steps:
        say(f"running {name}")
        code = subprocess.run(command, cwd=ROOT, env=env, check=False).returncode
        if code != 0:
            say(f"{name} failed (exit {code})")
            return code
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
