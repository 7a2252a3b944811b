"""The peers' own virtualenvs under the cache root, built once from a pip recipe and never a
dependency of the project (genlm-bytes, minicons), and the subprocess a peer's runner answers in.

Each peer names its venv (``peers/<name>-venv``) and gives the pip lines that build it plus a
python statement that checks the build. The venv holds a marker file with the recipe it was built
from, written last: a venv whose marker is missing (a broken build) or names another recipe is
rebuilt from scratch, under a lock so that one process builds while the others wait.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

from marginal_core.ground.cache_home import cache_root

MARKER = "marginal-peer.json"


def pinned_torch() -> list[str]:
    """Our torch and transformers, pinned exactly: an unpinned torch pulls gigabytes of CUDA wheels,
    while ``torch==<ours>`` installs the CPU wheel already on disk."""
    return [f"torch=={version('torch').split('+')[0]}", f"transformers=={version('transformers')}"]


def venv_dir(name: str) -> Path:
    """Where the peer's venv lives: ``<cache root>/peers/<name>-venv``."""
    return cache_root() / "peers" / f"{name}-venv"


def stderr_log(line: str) -> None:
    """The default progress log: a line on stderr, off any JSON on stdout."""
    print(line, file=sys.stderr, flush=True)


def ensure_venv(name: str, recipe: list[list[str]], check: str, log: Callable[[str], None] = stderr_log) -> Path:
    """The peer venv's python, building the venv first when missing or built by another recipe:
    each recipe line is one ``pip install``, then ``python -c check`` must succeed."""
    venv, wanted = venv_dir(name), json.dumps(recipe)
    marker, python = venv / MARKER, venv / "bin" / "python"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{name}-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time
        if marker.is_file() and marker.read_text() == wanted:
            return python
        log(f"building the {name} peer venv in {venv} (a few minutes, once)")
        started = time.perf_counter()
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        for line in recipe:
            subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-warn-conflicts", *line], check=True)
        subprocess.run([str(python), "-c", check], check=True)
        marker.write_text(wanted)  # written last: a broken build is rebuilt next time
        log(f"{name} peer venv built in {time.perf_counter() - started:.0f} s")
    return python


class PeerProcess:
    """A peer's runner in its venv's python, one JSON request a line in and one reply a line out
    (a reply with ``error`` raises); offline, and started with -P so that nothing beside the
    runner can shadow the peer's own package."""

    def __init__(self, name: str, python: Path, runner: Path) -> None:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        self.name = name
        self.process = subprocess.Popen([str(python), "-P", str(runner)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, env=env)

    def ask(self, request: dict) -> dict:
        """The runner's reply to one request."""
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.name} peer exited with status {self.process.wait()}")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{self.name} peer: {reply['error']}")
        return reply

    def close(self) -> None:
        """End the runner (its input closed) and wait for it."""
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=60)
