"""One writer per results folder at a time (docs/design.md, "Results folders").

Two runs appending to one folder would each score every item (a class pressing Run on the same
Q&A setup did the work once per student) and could cut each other's lines: a store drops a torn
last line when it opens. A run therefore holds the folder's writer lock, an ``flock`` on
``.writer.lock`` that the system frees when the holding process ends, however it ends. The lock
file names its holder (process, host, since when) for the message a second run gets.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from marginal_core.errors import MarginalError

try:
    import fcntl
except ImportError:  # Windows: no flock; runs on one folder are not kept apart there
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".writer.lock"


class FolderBusy(MarginalError):
    """Another run holds a results folder's writer lock; ``holder`` says which run."""

    def __init__(self, folder: Path, holder: str) -> None:
        super().__init__(f"{folder} is being written by another run ({holder}); wait for it to end, "
                         "or give this run another output folder")
        self.folder, self.holder = folder, holder


class WriterLock:
    """A held writer lock of a results folder; leaving its with-block (or the process ending)
    frees it."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    @classmethod
    def take(cls, folder: str | os.PathLike) -> WriterLock:
        """The folder's writer lock (the folder made if need be), or FolderBusy at once if
        another run holds it."""
        folder = Path(folder)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise MarginalError(f"cannot write the output folder {folder}: {err}") from err
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

    def __enter__(self) -> WriterLock:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)  # frees the lock


def _holder(fd: int) -> str:
    """What the lock's holder wrote of itself, as words."""
    try:
        who = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"process {who['pid']} on {who['host']}, since {who['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "it has not said which yet"
