"""Hypothesis strategies for the servers' request bodies: any text and any JSON value."""

from __future__ import annotations

from hypothesis import strategies as st

# Text of any code point, lone surrogates among them (JSON can escape one; no encoding holds it).
# (st.text would leave the surrogates out.)
ANY_TEXT = st.lists(
    st.characters(exclude_categories=()) | st.sampled_from("\ud800\udfff\x00\u200b\ufeff"),
    max_size=40,
).map("".join)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=10,
)
