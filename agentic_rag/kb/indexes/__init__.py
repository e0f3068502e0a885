"""The indexes a knowledge base searches: BM25 (_bm25, over _csr's arrays), dense and sparse
vectors (_vectors, which also write and read their own segment files), the knowledge graph
(_graph), metadata filters (_filters), rank fusion (_fusion), the lexical reranker (_rerank), and
the checks a saved index's files pass before it is built on them (_checks). None of them knows
about documents or chunks' text beyond the tokens and rows it is given."""
from ._bm25 import BM25 as BM25
from ._bm25 import batch_postings as batch_postings
from ._bm25 import bm25_idf as bm25_idf
from ._checks import check_bm25 as check_bm25
from ._checks import check_bm25_arrays as check_bm25_arrays
from ._checks import check_graph as check_graph
from ._checks import check_vocab as check_vocab
from ._checks import require as require
from ._csr import write_npz as write_npz
from ._filters import MAX_FILTER_VALUES as MAX_FILTER_VALUES
from ._filters import check_filters as check_filters
from ._filters import chunk_fields as chunk_fields
from ._filters import compile_filters as compile_filters
from ._filters import document_page as document_page
from ._filters import filter_mask as filter_mask
from ._filters import filter_values as filter_values
from ._filters import kept_chunks as kept_chunks
from ._filters import matches as matches
from ._fusion import FUSIONS as FUSIONS
from ._fusion import reciprocal_rank_fusion as reciprocal_rank_fusion
from ._fusion import score_fusion as score_fusion
from ._graph import HUB_ROWS as HUB_ROWS
from ._graph import KnowledgeGraph as KnowledgeGraph
from ._graph import TripleExtractor as TripleExtractor
from ._graph import node_key as node_key
from ._graph import pagerank as pagerank
from ._graph import seed_names as seed_names
from ._graph import walk as walk
from ._rerank import LexicalReranker as LexicalReranker
from ._rerank import Reranker as Reranker
from ._vectors import DenseIndex as DenseIndex
from ._vectors import SparseIndex as SparseIndex
from ._vectors import VectorIndex as VectorIndex
from ._vectors import holds_vector as holds_vector
from ._vectors import load_vectors as load_vectors
from ._vectors import saved_arrays as saved_arrays
from ._vectors import vector_index as vector_index
