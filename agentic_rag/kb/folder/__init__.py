"""The folder store: the embedded KnowledgeBase (_knowledge_base), held in memory and read through
a snapshot of its indexes (_snapshot), saved to a folder of segments (_segments: one full segment,
then deltas), written atomically under a manifest (_store) by one writer at a time (_lock; searches
and adds share a read-write lock, _rwlock), each saved file checked before it is used (_integrity)."""
from ._knowledge_base import FILL_BATCH, KnowledgeBase
from ._segments import MAX_DELTAS
from ._store import FORMAT_VERSION, check_target, os_cause, read_generation, segments, writer_lock

__all__ = ["KnowledgeBase", "FILL_BATCH", "MAX_DELTAS", "FORMAT_VERSION", "check_target", "os_cause", "read_generation",
           "segments", "writer_lock"]
