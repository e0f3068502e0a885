"""The indexes a knowledge base searches: BM25 (_bm25, over _csr's arrays), dense and sparse
vectors (_vectors, which also write and read their own segment files), the knowledge graph
(_graph), metadata filters (_filters), rank fusion (_fusion), the lexical reranker (_rerank), and
the checks a saved index's files pass before it is built on them (_checks). None of them knows
about documents or chunks' text beyond the tokens and rows it is given."""
