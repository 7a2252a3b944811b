"""The plain-words lines the pages share, written once: what a nat is, why the proxy may land
above the exact value, and the precision the numbers were computed in."""

from __future__ import annotations

from pages._app.runtime import device_choices
from pages._app.ui.inputs import Inputs

NATS = ("log p is a natural logarithm, in **nats**: a difference of 1 nat is a factor of e ≈ 2.7 in probability, "
        "0.01 nats about 1%.")
PROXY_MAY_EXCEED = ("The proxy is an importance-sampling *estimate*, not a bound: with few samples it can land above "
                    "the exact value as well as below it.")


def precision(inp: Inputs) -> str:
    """One line naming the model, device and dtype the page's numbers were computed in."""
    return f"Computed with {inp.model} on {device_choices.device_label(inp.device, inp.dtype)}."
