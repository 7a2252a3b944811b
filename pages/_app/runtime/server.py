"""What this server lets its visitors ask for, read from the environment (docs/serving.md,
"What visitors may ask for").

A server others can reach is in class mode unless told otherwise: only the allowed models, capped
k, beam width and text length, and no server path in any message or widget. It is reachable when
it listens on anything but loopback (a plain ``streamlit run app.py`` listens on every interface)
or runs where a hosted service says so in its environment (Hugging Face Spaces sets ``SPACE_ID``).
``MARGINAL_SERVE=class`` asks for class mode anywhere, ``MARGINAL_SERVE=open`` for none (any
Hugging Face id or server folder, within the app's own limits); ``make app`` on 127.0.0.1 is open.
Each cap can also be set on its own. app.py records the address as the server imports it
(:func:`listening_on`) and says there, once, what the server offers; ``python -m
pages._app.runtime.serve`` (what ``make app`` and ``make serve-class`` run) checks the variables
before Streamlit starts.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from marginal_core import DEFAULT_BEAM_WIDTH, MAX_BEAM_WIDTH
from marginal_core.ground.errors import MarginalError
from marginal_core.models import EMBEDDED_MODELS, known_models
from pages._app.ui.defaults import MAX_SAMPLES

SERVE = "MARGINAL_SERVE"
ALLOWED_MODELS = "MARGINAL_ALLOWED_MODELS"
MAX_SAMPLES_ENV = "MARGINAL_MAX_SAMPLES"
MAX_TEXT_CHARS_ENV = "MARGINAL_MAX_TEXT_CHARS"
MAX_BEAM_WIDTH_ENV = "MARGINAL_MAX_BEAM_WIDTH"
MAX_RUNS_ENV = "MARGINAL_MAX_RUNS"
SHARED_PASSES_ENV = "MARGINAL_SHARED_PASSES"
# Hosted services that set a variable in the app's environment: the app is public there.
HOSTED = {"SPACE_ID": "Hugging Face Spaces"}
# The address this process's Streamlit server listens on ("" for every interface), once app.py
# is imported by the server; none where no server runs (a test's AppTest, a notebook).
_LISTENING: dict[str, str] = {}
# Runs admitted to take turns on the machine at once (pages/_app/runtime/machine.py), in either mode.
DEFAULT_MAX_RUNS = 16

# Class mode's caps where its variable is unset.
CLASS_MAX_SAMPLES = 1_000
CLASS_MAX_TEXT_CHARS = 2_000
CLASS_MAX_BEAM_WIDTH = 64
# The smallest sample cap taken (the rank page draws at least 3 proxy samples a sentence, and fewer
# than 10 say little about a marginal). The beam's cap is at least its default width, which the
# task pages run it at.
MIN_SAMPLES_CAP = 10


class PolicyError(MarginalError):
    """A server variable the app cannot take; the message names it and what it takes."""


@dataclass(frozen=True)
class ServerPolicy:
    """What visitors may ask of this server. None: no limit beyond the app's own (the local default)."""

    class_mode: bool = False
    why: str = ""  # why the server is in its mode, for its log and its sidebar
    models: tuple[str, ...] | None = None  # the models offered; None: any id or folder
    max_samples: int | None = None  # k, proxy samples and the task pages' samples
    max_text_chars: int | None = None  # characters of the text and of the context, each
    max_beam_width: int | None = None
    max_runs: int = DEFAULT_MAX_RUNS  # runs taking turns at once; later ones wait in the queue
    shared_passes: bool = True  # sessions' scoring after the same context shares passes (marginal_core.serving.batching)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, address: str | None = None) -> ServerPolicy:
        """The policy the environment sets for a server listening on address ("" for every interface;
        None: no server); raises PolicyError naming a variable it cannot take."""
        env = os.environ if env is None else env
        mode = env.get(SERVE, "").strip().lower()
        if mode not in ("", "open", "local", "class"):
            raise PolicyError(f"{SERVE}={env[SERVE]!r}: expected 'class' (a server others reach) or 'open' "
                              "(any model id or folder)")
        reach = _reachable(env, address)
        on = mode == "class" or (not mode and bool(reach))
        why = f"{SERVE}={mode}" if mode else reach or ("it listens on this machine only" if address is not None else "")
        return cls(
            class_mode=on,
            why=why,
            models=_models(env.get(ALLOWED_MODELS, ""), tuple(known_models()) if on else None),
            max_samples=_cap(env, MAX_SAMPLES_ENV, MIN_SAMPLES_CAP, MAX_SAMPLES, CLASS_MAX_SAMPLES if on else None),
            max_text_chars=_cap(env, MAX_TEXT_CHARS_ENV, 1, sys.maxsize, CLASS_MAX_TEXT_CHARS if on else None),
            max_beam_width=_cap(env, MAX_BEAM_WIDTH_ENV, DEFAULT_BEAM_WIDTH, MAX_BEAM_WIDTH,
                                CLASS_MAX_BEAM_WIDTH if on else None),
            max_runs=_cap(env, MAX_RUNS_ENV, 1, 1_000, DEFAULT_MAX_RUNS),
            shared_passes=_switch(env, SHARED_PASSES_ENV, True),
        )

    def allows(self, model: str) -> bool:
        """Whether a visitor may load this model (embedded names in any case)."""
        return self.models is None or _canonical(model) in self.models

    @property
    def shows_server_paths(self) -> bool:
        """Whether messages and widgets may name the server's files and folders (task files, lm-eval
        results, the paths in an error): not in class mode."""
        return not self.class_mode

    def cap_samples(self, limit: int) -> int:
        """A page's largest number of samples under this server's cap."""
        return limit if self.max_samples is None else min(limit, self.max_samples)

    def cap_beam_width(self, limit: int) -> int:
        """A page's largest beam width under this server's cap."""
        return limit if self.max_beam_width is None else min(limit, self.max_beam_width)

    def offer(self) -> str:
        """One sentence for visitors on what they may choose here; empty for the local default."""
        parts = [", ".join(self.models)] if self.models is not None else []
        if self.max_samples is not None:
            parts.append(f"samples k up to {self.max_samples:,}")
        if self.max_beam_width is not None:
            parts.append(f"beam width W up to {self.max_beam_width:,}")
        if self.max_text_chars is not None:
            parts.append(f"texts and contexts up to {self.max_text_chars:,} characters")
        return f"This server offers: {'; '.join(parts)}." if parts else ""

    def help(self) -> str:
        """The sidebar's help on what the server offers: its mode, why, and who changes it."""
        mode = "class mode" if self.class_mode else "open mode, with caps"
        why = f": {self.why}" if self.why else ""
        return (f"This server is in {mode}{why}. Whoever runs it sets what it offers with the MARGINAL_* "
                "variables (docs/serving.md); on your own machine, `make app` offers any model.")

    def describe(self) -> str:
        """What the server offers and why, in one line for its log."""
        notes = [self.why] if self.why else []
        if self.class_mode and not self.why.startswith(SERVE):
            notes.append(f"{SERVE}=open lifts the limits")
        said = f" ({'; '.join(notes)})" if notes else ""
        return (f"marginal app, {'class' if self.class_mode else 'open'} mode{said}: "
                + (self.offer() or "any model id or folder, the app's own limits."))


def policy() -> ServerPolicy:
    """This server's policy, read on every call (a script run reads it in a few microseconds, and
    tests change the environment between runs)."""
    return ServerPolicy.from_env(address=_LISTENING.get("address"))


def listening_on(address: str | None) -> None:
    """Record the address this process's server listens on (None or "": every interface)."""
    _LISTENING["address"] = (address or "").strip()


def _reachable(env: Mapping[str, str], address: str | None) -> str:
    """Why others can reach this server, in words ("" where they cannot, or no server runs)."""
    for name, service in HOSTED.items():
        if env.get(name, "").strip():
            return f"it runs on {service}: {name} is set"
    if address is None:
        return ""
    if address in ("", "0.0.0.0", "::"):
        return "it listens on every network interface"
    if address == "localhost" or _loopback(address):
        return ""
    return f"it listens on {address}"


def _loopback(address: str) -> bool:
    """Whether an address is this machine's own (127.0.0.0/8, ::1); a host name is not."""
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def _canonical(model: str) -> str:
    """A model name as the allow-list holds it: embedded names lower-cased, others as given."""
    name = model.strip()
    return name.lower() if name.lower() in EMBEDDED_MODELS else name


def _models(raw: str, default: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """The comma-separated allow-list, without repeats; default where it is unset."""
    names = tuple(dict.fromkeys(_canonical(n) for n in raw.split(",") if n.strip()))
    if raw.strip() and not names:
        raise PolicyError(f"{ALLOWED_MODELS}={raw!r}: expected model names separated by commas")
    return names or default


def _cap(env: Mapping[str, str], name: str, low: int, high: int, default: int | None) -> int | None:
    """A whole number from low to high, or default where the variable is unset or empty."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        top = "" if high == sys.maxsize else f" to {high:,}"
        raise PolicyError(f"{name}={raw!r}: expected a whole number from {low:,}{top}")
    return int(raw)


def _switch(env: Mapping[str, str], name: str, default: bool) -> bool:
    """'on' or 'off' (default where the variable is unset or empty)."""
    raw = env.get(name, "").strip().lower()
    if raw not in ("", "on", "off"):
        raise PolicyError(f"{name}={env[name]!r}: expected 'on' or 'off'")
    return default if not raw else raw == "on"


def check() -> int:
    """Check the variables before Streamlit starts (exit status 2, and one line, on a bad value)."""
    try:
        ServerPolicy.from_env()
    except PolicyError as exc:
        print(f"marginal app: {exc}", file=sys.stderr)
        return 2
    return 0


def started(address: str | None) -> None:
    """Record the server's address and say once, in its log, what it offers (a bad variable is
    said here and again on every page)."""
    listening_on(address)
    try:
        print(policy().describe(), flush=True)
    except PolicyError as exc:
        print(f"marginal app: {exc}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(check())
