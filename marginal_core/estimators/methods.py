"""The estimators by name: the one list every part uses (the library, the CLI's choices, the
tasks, lm-eval's ``method=``, the app and the benches). Light: no torch."""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

from marginal_core.ground.errors import MarginalError


class Method(str, Enum):
    """The estimators a Marginalizer runs (docs/design.md, "The estimators")."""

    CANONICAL = "canonical"
    LATTICE = "lattice"
    PROXY = "proxy"
    BEAM = "beam"
    EXACT = "exact"

    def __str__(self) -> str:  # its name, in f-strings and prints on every Python version
        return self.value

    @property
    def progress_unit(self) -> str:
        """What a run of this method counts as it goes (its RunState's requested and covered): the
        beam's walk steps, every other method's samples."""
        return "steps" if self is Method.BEAM else "samples"

    @property
    def is_bound(self) -> bool:
        """Whether its estimate is a lower bound of p(text): a sum over distinct scored paths
        (every method but the proxy, whose importance-sampling mean can land above)."""
        return self is not Method.PROXY

    @classmethod
    def parse(cls, name: str | Method) -> Method:
        """The method of a name; a MarginalError naming the choices for an unknown one."""
        try:
            return cls(name)
        except ValueError:
            raise MarginalError(f"unknown method {name!r}; choose from {', '.join(METHODS)}") from None


METHODS = tuple(m.value for m in Method)
TASK_METHODS = tuple(m.value for m in Method if m is not Method.EXACT)  # what a task may run (exact does not scale)
DEFAULT_TASK_METHODS = (Method.CANONICAL.value, Method.LATTICE.value, Method.PROXY.value)  # unless told


def parse_methods(value: str | Sequence[str], allowed: Sequence[str] = TASK_METHODS) -> list[str]:
    """A comma list (or list) of methods, checked, in the order given, without repeats."""
    items = value.split(",") if isinstance(value, str) else list(value)
    methods = list(dict.fromkeys(m.strip().lower() for m in items if m.strip()))
    unknown = [m for m in methods if m not in allowed]
    if unknown or not methods:
        raise MarginalError(
            f"unknown method(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(allowed)}"
        )
    return methods
