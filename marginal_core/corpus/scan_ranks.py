"""A scan across the processes of a torch.distributed job: ``torchrun --nproc_per_node N -m
marginal_core scan ...``, ``accelerate launch --multi_gpu -m marginal_core scan ...`` (torchrun
underneath), or torchrun on several nodes.

The launcher gives each process RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT;
:func:`join` starts the process group from them (or takes the one the caller already started,
an ``Accelerator()`` in a script calling ``mc.scan``). The ranks are the scan's shards: rank r
scores the texts ``--shard r+1/N`` would, into the one folder, holding that shard's run lock
(tasks/writer.py), so a second job on the same folder is refused rank by rank.

The group carries barriers only (no tensor crosses it), so it is gloo, over the CPU's sockets,
on every machine: each rank's model sits on its own GPU (``cuda:LOCAL_RANK``) where there is one,
but the ranks need no NCCL communicator, and gloo's wait is the one set here (WAIT), long enough
for a rank with more texts left than the others (a resumed run) to finish while they wait.

Without a launcher (WORLD_SIZE unset or 1) :func:`join` returns None and imports nothing: a plain
scan is what it was, torch.distributed never imported.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from datetime import timedelta

from marginal_core.ground.errors import MarginalError

# How long a rank waits at a barrier for the others (gloo's timeout): a rank whose share is done
# waits there for the slowest one.
WAIT = timedelta(days=7)


@dataclass(frozen=True)
class Ranks:
    """This process's place in the job: rank (0 .. size-1), size (the world), local (its rank on
    its node: which GPU it takes), and whether it started the group (and so ends it)."""

    rank: int
    size: int
    local: int = 0
    owned: bool = True

    @property
    def shard(self) -> tuple[int, int]:
        """The texts of this rank, as --shard counts them (i/n, from 1)."""
        return self.rank + 1, self.size

    @property
    def lead(self) -> bool:
        """Rank 0: writes scan.json before the others score, and the tables after they finish."""
        return self.rank == 0

    def device(self, asked: str | None) -> str | None:
        """Where this rank's model goes: with CUDA and a device left to choose (auto, cuda), this
        node's GPU number LOCAL_RANK (modulo the GPUs it has); any other choice as asked."""
        if asked not in (None, "auto", "cuda"):
            return asked
        import torch

        if not torch.cuda.is_available():
            return asked
        index = self.local % torch.cuda.device_count()
        torch.cuda.set_device(index)
        return f"cuda:{index}"

    def barrier(self) -> None:
        """Wait until every rank reaches this point (WAIT at most)."""
        import torch.distributed

        torch.distributed.barrier()

    def leave(self) -> None:
        """End the group this process started (one left to the interpreter's exit can abort the
        process after its work is done); a caller's group is the caller's to end."""
        import torch.distributed

        if self.owned and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def launched() -> bool:
    """Whether a launcher started this process as one of several (RANK and WORLD_SIZE > 1)."""
    try:
        return "RANK" in os.environ and int(os.environ.get("WORLD_SIZE") or 1) > 1
    except ValueError:
        raise MarginalError(f"WORLD_SIZE={os.environ['WORLD_SIZE']!r} is not a number of processes") from None


def join() -> Ranks | None:
    """This process's Ranks in a job of several (the group started from the launcher's
    variables, or the caller's), or None for a scan on its own."""
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        if distributed.get_world_size() <= 1:
            return None
        return Ranks(distributed.get_rank(), distributed.get_world_size(), _local_rank(), owned=False)
    if not launched():
        return None
    import torch.distributed

    if not torch.distributed.is_available():
        raise MarginalError("this torch has no torch.distributed: run the scan with --shard i/n in each process instead")
    torch.distributed.init_process_group("gloo", timeout=WAIT)  # env://: RANK, WORLD_SIZE, MASTER_ADDR/PORT
    return Ranks(torch.distributed.get_rank(), torch.distributed.get_world_size(), _local_rank())


def _local_rank() -> int:
    """The process's rank on its node (LOCAL_RANK; 0 where the launcher gives none)."""
    try:
        return int(os.environ.get("LOCAL_RANK") or 0)
    except ValueError:
        return 0
