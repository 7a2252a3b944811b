"""Who writes a results folder, and when (docs/design.md, "Results folders").

**Runs.** Two runs of one setup in one folder would each score every item (a class pressing Run
on the same Q&A setup did the work once per student). A run therefore holds the folder's run
lock, an ``flock`` that the system frees when the holding process ends, however it ends; its
file names the holder (process, host, since when) for the message a second run gets. The lock
covers the run's part of the items: a scan's shards (``--shard i/n``) score disjoint texts, so
each has a lock of its own and n processes may share one folder.

**Appends.** Every write into a folder's files (a row, a sample, a session line) holds the
folder's append lock for the moment it takes. A line without its newline under that lock was
left by a process killed mid-write, so the writer cuts it before adding its own.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from marginal_core.ground.errors import MarginalError

try:
    import fcntl
except ImportError:  # Windows: no flock; runs on one folder are not kept apart there
    fcntl = None  # type: ignore[assignment]

RUN_LOCK = ".writer.lock"  # .writer-<part>.lock for a part of the items
APPEND_LOCK = ".append.lock"


class FolderBusy(MarginalError):
    """Another run holds a results folder's run lock; ``holder`` says which run."""

    def __init__(self, folder: Path, holder: str) -> None:
        super().__init__(f"{folder} is being written by another run ({holder}); wait for it to end, "
                         "or give this run another output folder")
        self.folder, self.holder = folder, holder


class RunLock:
    """A held run lock of a results folder; leaving its with-block (or the process ending)
    frees it."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    @classmethod
    def take(cls, folder: str | os.PathLike, part: str | None = None) -> RunLock:
        """The folder's run lock for the whole of its items, or for one part of them (the
        folder made if need be); FolderBusy at once if another run holds it."""
        folder = Path(folder)
        fd = _open(folder, RUN_LOCK if part is None else f".writer-{part}.lock")
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise FolderBusy(folder, holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                  "since": time.strftime("%H:%M:%S")}).encode(), 0)
        return cls(fd)

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)  # frees the lock


@contextmanager
def appending(folder: Path) -> Iterator[None]:
    """Hold the folder's append lock for the with-block (waiting for another writer's moment)."""
    fd = _open(folder, APPEND_LOCK)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _open(folder: Path, name: str) -> int:
    """A lock file of the folder, opened (both made if need be)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return os.open(folder / name, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise MarginalError(f"cannot write the output folder {folder}: {err}") from err


def _holder(fd: int) -> str:
    """What the lock's holder wrote of itself, as words."""
    try:
        who = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"process {who['pid']} on {who['host']}, since {who['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "it has not said which yet"
