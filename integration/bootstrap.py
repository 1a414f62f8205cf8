"""Set up a fresh checkout and run its main job or its tests: ``python3 -m integration.bootstrap``.

Standard library only, so it runs before anything is installed. It creates ``.venv`` (or
``$METASTORE_VENV``), installs the project with its dev extras when pyproject.toml changed (with
uv, or pip when uv cannot be had), resolves the Kafka and Spark connector jars from Maven Central
(once; beside pip, with this Python: ``metastore.dev.prefetch``), installs Debian's Chromium for
the console's browser tests when it is missing (``metastore.dev.browser``), builds the project's JVM
module ``jvm/`` (running its JUnit tests for ``test``) and, for the tests, builds the local Schema
Registry, then runs:

- ``demo``: the main job (local Kafka and a demo of the metastore);
- ``test``: ruff, mypy and the whole test suite against real Kafka (and Spark), in two phases:
  every test not marked ``serial`` on ``METASTORE_TEST_WORKERS`` pytest-xdist workers (3 by
  default: two Spark lanes and one for the rest, see tests/support/schedule.py), then the
  ``serial`` ones (they measure the machine) alone;
- ``test --quick``: ruff, mypy and the quick tier (``-m quick``: the pure tests), no broker.

Extra arguments after the job name go to the job (for ``test``: to one pytest run, in place of
the phases: ``test tests/unit/test_parser.py -k valid``).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

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
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()
                            + INSTALL_FORMAT.encode()).hexdigest()
    if not stamp.exists() or stamp.read_text() != wanted:
        say("installing the project and its dependencies (first run: about half a minute)")
        started = time.monotonic()
        install(python)
        stamp.write_text(wanted)
        say(f"installed in {time.monotonic() - started:.0f}s")
    compile_project(python)
    return venv


PROJECT_PACKAGES = ("metastore", "cli", "integration")
INSTALL_FORMAT = "dependencies compiled to bytecode"
"""Part of the install's stamp: a virtualenv installed before its dependencies were compiled
is installed again."""


def compile_project(python: Path) -> None:
    """The project's modules compiled to bytecode, as an installer compiles its dependencies'
    (the project is installed editable, so nothing else does; ``py_compile`` writes even under
    ``PYTHONDONTWRITEBYTECODE``). Without it every node and CLI process compiles the modules it
    imports anew: a node took 1.5 s from process start to READY instead of 0.6-0.7 s. A
    checkout that cannot be written to still runs, uncompiled."""
    done = subprocess.run([str(python), "-m", "compileall", "-q", "-j", "0",
                           *(str(ROOT / package) for package in PROJECT_PACKAGES)],
                          check=False)
    if done.returncode != 0:
        say("the project's modules could not all be compiled to bytecode: each process will "
            "compile what it imports")


def install(python: Path) -> None:
    """The project with its dev extras into the virtualenv of ``python``: with uv (from PyPI,
    into the same virtualenv), which downloads and builds in parallel, in about half pip's
    time; with pip when uv cannot be had. Both compile the dependencies to bytecode (pip does
    by default, uv when asked)."""
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    project = ["-e", f"{ROOT}[dev]"]
    uv = python.parent / "uv"
    if subprocess.run([*pip, "uv"], check=False).returncode == 0 and uv.exists():
        done = subprocess.run([str(uv), "pip", "install", "--quiet", "--compile-bytecode",
                               "--python", str(python), *project], check=False, cwd=ROOT)
        if done.returncode == 0:
            return
        say("uv could not install the project (it reads no pip configuration): trying pip")
    else:
        say("uv could not be installed: installing with pip")
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, *project], check=True, cwd=ROOT)


def run(argv: list[str]) -> int:
    if not argv or argv[0] not in ("demo", "test"):
        print("usage: python3 -m integration.bootstrap demo|test [args...]", file=sys.stderr)
        return 2
    job, extra = argv[0], argv[1:]
    everything = job == "test" and extra != ["--quick"]  # the registry formats' tests
    started = time.monotonic()
    prefetching = start_prefetch(everything, jvm_tests=everything)
    browser = start_browser_install() if everything else None
    try:
        venv = ensure_venv()
    except BaseException:
        os.killpg(prefetching.pid, signal.SIGTERM)  # and the Maven it runs
        prefetching.wait()
        raise
    if prefetching.wait() != 0:
        return max(prefetching.returncode, 1)
    if browser is not None and browser.wait() != 0:
        say("Chromium is missing: the console's browser tests will fail, the others run")
    bin_dir = venv / "bin"
    fetch = [str(bin_dir / "metastore"), "dev", "fetch", *(["--all"] if everything else [])]
    fetched = subprocess.run(fetch, cwd=ROOT, check=False)
    if fetched.returncode != 0:
        return fetched.returncode
    say(f"ready in {time.monotonic() - started:.0f}s")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    if job == "demo":
        return subprocess.run([str(bin_dir / "metastore"), "dev", "demo", *extra],
                              cwd=ROOT, env=env, check=False).returncode
    checks = [("ruff", [str(bin_dir / "ruff"), "check", "."]), ("mypy", [str(bin_dir / "mypy")])]
    for name, command in checks:
        code = timed(name, command, env)
        if code != 0:
            return code
    return run_pytest(bin_dir, extra, env)


def start_prefetch(optional: bool, jvm_tests: bool) -> subprocess.Popen[bytes]:
    """Maven's part of the set-up, beside pip's: the jars, the project's JVM jars (with their
    JUnit tests for the test command) and, when ``optional``, the local Schema Registry and the
    Kafka Connect worker, with this Python, which needs nothing installed
    (``metastore.dev.prefetch``)."""
    command = [sys.executable, "-m", "metastore.dev.prefetch",
               *(["--schema-registry", "--connect"] if optional else []),
               *(["--jvm-tests"] if jvm_tests else [])]
    say("fetching the jars from Maven Central" + (
        ", the local Schema Registry and Kafka Connect" if optional else "")
        + " beside the Python packages")
    return subprocess.Popen(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            start_new_session=True)


def start_browser_install() -> subprocess.Popen[bytes]:
    """Debian's Chromium for the console's browser tests, installed with apt when missing
    (``metastore.dev.browser``, standard library only), beside pip and Maven."""
    return subprocess.Popen([sys.executable, "-m", "metastore.dev.browser"], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


PYTEST_NO_TESTS = 5


def run_pytest(bin_dir: Path, extra: list[str], env: dict[str, str]) -> int:
    pytest = [str(bin_dir / "python"), "-m", "pytest"]
    if extra == ["--quick"]:
        return timed("the quick tier", [*pytest, "-m", "quick", "-q", "tests"], env)
    if extra:
        return timed("pytest", [*pytest, *extra], env)
    workers = os.environ.get("METASTORE_TEST_WORKERS", "3")
    phases = [
        ("the parallel phase", [*pytest, "tests", "integration", "-m", "not serial",
                                "-n", workers, "--dist", "loadgroup", "--no-loadscope-reorder"]),
        ("the serial phase", [*pytest, "tests", "integration", "-m", "serial", "-p", "no:xdist"]),
    ]
    durations: dict[str, float] = {}
    outcomes: dict[str, int] = {}
    failures: list[int] = []
    started = time.monotonic()
    for name, command in phases:
        last_run_file().unlink(missing_ok=True)
        code = timed(name, command, env)
        last = last_run()
        durations.update(last.get("durations", {}))
        for outcome, count in last.get("outcomes", {}).items():
            outcomes[outcome] = outcomes.get(outcome, 0) + count
        if code != 0 and not (name == "the serial phase" and code == PYTEST_NO_TESTS):
            failures.append(code)
    summarize(durations, outcomes, time.monotonic() - started)
    return failures[0] if failures else 0


def timed(name: str, command: list[str], env: dict[str, str]) -> int:
    say(f"running {name}")
    started = time.monotonic()
    code = subprocess.run(command, cwd=ROOT, env=env, check=False).returncode
    outcome = "passed" if code == 0 else f"failed (exit {code})"
    say(f"{name} {outcome} in {time.monotonic() - started:.0f}s")
    return code


def last_run_file() -> Path:
    """What the last pytest run measured and counted (written by the root conftest)."""
    return Path(os.environ.get("METASTORE_CACHE_DIR", ROOT / ".cache")) / "test-durations-last.json"


def last_run() -> dict[str, dict[str, Any]]:
    try:
        loaded = json.loads(last_run_file().read_text())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def summarize(durations: dict[str, float], outcomes: dict[str, int], wall: float,
              shown: int = 25) -> None:
    say(f"the {shown} slowest tests of both phases:")
    for nodeid, seconds in sorted(durations.items(), key=lambda kv: -kv[1])[:shown]:
        print(f"{seconds:8.1f}s  {nodeid}", flush=True)
    say(f"{len(durations)} tests, {sum(durations.values()):.0f}s of test time, "
        f"{wall:.0f}s of wall time")
    failed = outcomes.get("failed", 0) + outcomes.get("error", 0)
    print(f"tests: {outcomes.get('passed', 0)} passed, {failed} failed, "
          f"{outcomes.get('skipped', 0)} skipped", flush=True)

if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
