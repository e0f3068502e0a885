"""The PostgreSQL store: PostgresKnowledgeBase (_knowledge_base: connections, schema checks and
migrations, one transaction per read or write, each read a snapshot: _snapshot), its schema and
writes (_sql), its retrievers in SQL (_search, with the pruned top k of _pruned), its pools of
connections to a primary and read replicas (_connections) and its error messages (_errors)."""
from ._errors import safe_url
from ._knowledge_base import PostgresKnowledgeBase

__all__ = ["PostgresKnowledgeBase", "safe_url"]
