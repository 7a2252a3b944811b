"""The Llama-2-style tokenizer fixture shared by test_lattice.py and test_lattice_tokenizers.py."""

from __future__ import annotations

import pytest

from tests.tokenizer_cases import llama_style


@pytest.fixture(scope="module")
def llama():
    return llama_style()
