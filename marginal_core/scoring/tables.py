"""A lattice's node automaton (``lattice.proposal``) as tensors on the model's device: what the
constrained sampler, the beam and the prefix search read of a node state (its arcs' tokens, next
states, width and whether it is final)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from marginal_core.lattice.proposal import Proposal


@dataclass
class Tables:
    """The proposal's arrays as tensors on the model's device."""

    tokens: torch.Tensor
    next_state: torch.Tensor
    width: torch.Tensor
    final: torch.Tensor

    @classmethod
    def of(cls, proposal: Proposal, device: torch.device) -> Tables:
        t = lambda a: torch.as_tensor(a, device=device)  # noqa: E731
        return cls(t(proposal.tokens), t(proposal.next_state), t(proposal.width), t(proposal.final))
