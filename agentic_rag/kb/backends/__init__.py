"""Knowledge bases behind one protocol (_protocol), sharing one core (_core: chunk records, the
built-with check; _search: the search template, graph ranking, restricted views): the embedded
one (_embedded) with its segment persistence (_segments, over the store _store, its locks _lock
and _rwlock, and the checks every saved file passes, _integrity), PostgreSQL with pgvector
(_postgres, the class; _postgres_sql, its schema and writes; _postgres_search, its retrievers in
SQL; _postgres_errors, its messages), and one way to open either by where it lives (_open)."""
