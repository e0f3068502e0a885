"""Text to L2-normalised vectors: the hashing and e5 embedders and the Embedder protocol
(_embedders), and an OpenAI-compatible embeddings server (_openai)."""
from ._cache import EmbeddingCache as EmbeddingCache
from ._embedders import EMBEDDERS as EMBEDDERS
from ._embedders import REMOVED as REMOVED
from ._embedders import E5Embedder as E5Embedder
from ._embedders import Embedder as Embedder
from ._embedders import EmbedProgress as EmbedProgress
from ._embedders import HashingEmbedder as HashingEmbedder
from ._embedders import SymmetricEmbedder as SymmetricEmbedder
from ._embedders import content_key as content_key
from ._embedders import embed_batches as embed_batches
from ._embedders import embed_query as embed_query
from ._embedders import embedder_trait as embedder_trait
from ._embedders import l2_normalize as l2_normalize
from ._embedders import make_embedder as make_embedder
from ._openai import OpenAIEmbedder as OpenAIEmbedder
from ._openai import parse_openai_embedder_name as parse_openai_embedder_name
