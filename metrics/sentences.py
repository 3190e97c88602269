"""Trained transformers as token flows: read a sentence-transformers export, embed a sentence, run its heads.

The public face of the trained-heads tools (the code lives in ``metrics._studies.sentences``):
:func:`sentence_flow` (also ``metrics.sentence_flow``) and the loaders it needs, which read an
installed model package without importing it and never download.
"""

from ._studies.sentences import (
    FLOW_DIAGNOSTICS,
    MAX_FLOW_SAVE_BYTES,
    MAX_FLOW_STEPS,
    bert_embeddings,
    packaged_model_zip,
    read_model_zip,
    sentence_flow,
    tokenize,
)

__all__ = ["sentence_flow", "packaged_model_zip", "read_model_zip", "tokenize", "bert_embeddings", "FLOW_DIAGNOSTICS",
           "MAX_FLOW_STEPS", "MAX_FLOW_SAVE_BYTES"]
