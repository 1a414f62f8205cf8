"""The node's local file system (``io.metastore.fs``): Hadoop's, with permissions and symlinks
read and set by NIO instead of forked ``chmod``, ``ls`` and ``readlink``. A Spark session in local
mode uses it for FileSystem and FileContext alike (streaming checkpoints, the Hive warehouse),
and every answer is the one Hadoop's own RawLocalFileSystem gives."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from metastore.jvm import classes


def _forks() -> int:
    """Processes and threads the kernel has created since boot (/proc/stat)."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("processes "):
            return int(line.split()[1])
    raise AssertionError("no processes line in /proc/stat")


def test_a_local_session_uses_the_no_fork_file_system(spark: Any) -> None:
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    local = jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf)
    assert local.getClass().getName() == classes.LOCAL_FILE_SYSTEM_CLASS
    context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(conf)
    assert context.getDefaultFileSystem().getClass().getName() == classes.LOCAL_FS_CLASS


def test_its_answers_are_hadoops_own(spark: Any, tmp_path: Path) -> None:
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    mine = jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf).getRawFileSystem()
    hadoops = jvm.org.apache.hadoop.fs.RawLocalFileSystem()
    hadoops.initialize(jvm.java.net.URI.create("file:///"), conf)
    path = jvm.org.apache.hadoop.fs.Path
    mode = jvm.org.apache.hadoop.fs.permission.FsPermission
    for name, fs in (("mine", mine), ("hadoops", hadoops)):
        base = tmp_path / name
        assert fs.mkdirs(path(str(base / "d")), mode.createImmutable(0o750))
        fs.create(path(str(base / "d" / "f")), mode.createImmutable(0o640), False, 4096, 1,
                  1024 * 1024, None).close()
        fs.setPermission(path(str(base / "d" / "f")), mode.createImmutable(0o604))
        (base / "link").symlink_to(base / "d" / "f")
        (base / "dangling").symlink_to(base / "absent")
    def described(fs: Any, name: str) -> list[tuple[str, ...]]:
        base = tmp_path / name
        statuses = [fs.getFileStatus(path(str(base / "d"))), fs.getFileStatus(path(str(base / "d" / "f"))),
                    *fs.listStatus(path(str(base / "d")))]
        links = [fs.getFileLinkStatus(path(str(base / "link"))),
                 fs.getFileLinkStatus(path(str(base / "dangling")))]
        return [(s.getPath().getName(), str(s.getPermission()), s.getOwner(), s.getGroup(),
                 str(s.isDirectory()), str(s.getLen()), str(s.isSymlink()),
                 str(s.getSymlink().getName()) if s.isSymlink() else "")
                for s in [*statuses, *links]]
    assert described(mine, "mine") == described(hadoops, "hadoops")
    assert oct(os.stat(tmp_path / "mine" / "d").st_mode & 0o777) == oct(
        os.stat(tmp_path / "hadoops" / "d").st_mode & 0o777)
    assert oct(os.stat(tmp_path / "mine" / "d" / "f").st_mode & 0o777) == "0o604"


@pytest.mark.serial  # measures the machine: alone, after the parallel phase
def test_writing_files_forks_no_process(spark: Any, tmp_path: Path) -> None:
    """Hadoop's own forks chmod for each file (two processes: the command and the thread that
    reads its errors); this one forks none (threads a JVM starts meanwhile are few)."""
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    fs = jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf)
    path = jvm.org.apache.hadoop.fs.Path
    fs.create(path(str(tmp_path / "warm"))).close()
    before = _forks()
    for index in range(50):
        fs.create(path(str(tmp_path / f"f{index}"))).close()
        fs.rename(path(str(tmp_path / f"f{index}")), path(str(tmp_path / f"g{index}")))
        fs.getFileStatus(path(str(tmp_path / f"g{index}"))).getPermission()
    assert _forks() - before < 20
