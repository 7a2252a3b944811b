"""Streamlit home page (placeholder): pick a model and a text, see its canonical tokenization.

Run with `make app`. The views of the paper (lattice, samplers, mass, ...) live in pages/.
"""

from __future__ import annotations

import streamlit as st

from marginal_core.errors import MarginalError
from marginal_core.models import DEFAULT_MODEL, EMBEDDED_MODELS, known_models, load_tokenizer

st.set_page_config(page_title="marginal", layout="wide")
st.title("marginal")
st.write(
    "The probability a language model gives a text is a sum over **all** of its tokenizations, "
    "not just the one the tokenizer picks. This app estimates that marginal without decoding, "
    "by sampling tokenizations from the text's tokenization lattice."
)
st.caption(f"Default model: **{DEFAULT_MODEL}** ({EMBEDDED_MODELS[DEFAULT_MODEL].description}).")


@st.cache_resource(show_spinner="Loading the tokenizer...")
def _tokenizer(name: str):
    """The model's tokenizer, loaded once per server process."""
    return load_tokenizer(name)


model = st.selectbox("Model", known_models(), index=0)
text = st.text_area("Text", value="Tokenization is not unique.")

if text:
    try:
        tok = _tokenizer(model)
    except MarginalError as err:
        st.error(str(err))
    else:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        pieces = tok.convert_ids_to_tokens(ids)
        st.write(f"Canonical tokenization: **{len(ids)} tokens**")
        st.code(" | ".join(pieces), language=None)
