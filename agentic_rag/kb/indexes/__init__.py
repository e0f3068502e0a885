"""The indexes a knowledge base searches: BM25 (_bm25, over _csr's arrays), dense and sparse
vectors (_vectors), the knowledge graph (_graph), metadata filters (_filters), rank fusion
(_fusion) and the lexical reranker (_rerank). None of them knows about documents or files."""
