"""What the endpoints of one service share: its limits, and the parts every handler reads them from
(the model and its settings, the knowledge base, the cache, the figures, the keys)."""
from __future__ import annotations

from dataclasses import dataclass

from ..core import Config
from ..kb.ingestion import MAX_UPLOAD_BYTES
from ..models import Model
from ..tools import OffTool, Tool
from ._access import Access
from ._cache import AnswerCache
from ._metrics import Metrics
from ._served import ServedKnowledgeBase


@dataclass(frozen=True)
class ServiceLimits:
    """What one request may ask; beyond it the reply is 413, 400 or 429, never a hung worker."""

    max_body_bytes: int = 1_000_000
    max_question_chars: int = 2_000
    max_batch: int = 100             # documents in one POST /v1/documents
    max_concurrent_runs: int = 4     # agent runs at once in this process; more get 429
    write_wait_s: float = 10.0       # how long a write waits for another writer before 409
    max_file_bytes: int = MAX_UPLOAD_BYTES  # one uploaded file, decoded, or unpacked (.docx); more is refused
    max_messages: int = 256          # messages in one chat request (a run keeps 8 turns of them)
    max_instruction_chars: int = 4_000  # a chat request's system messages together
    max_conversations: int = 10_000  # kept conversations; the longest idle goes first
    conversation_idle_s: float = 86_400.0  # a conversation with no turn for this long has expired
    conversation_wait_s: float = 30.0  # a turn waits this long for its conversation's turn under way, then 409


@dataclass
class Parts:
    """One service's parts, shared by its endpoints: each handler reads them here at every request,
    so that limits given to the service later (`service.limits = ...`) hold for what a request may ask
    (sizes, k, rounds, budgets); the concurrent runs and the conversation store are sized once, when
    the service is made."""

    model: Model
    tools: tuple[Tool | OffTool, ...]
    config: Config
    model_name: str
    limits: ServiceLimits
    served: ServedKnowledgeBase
    cache: AnswerCache
    metrics: Metrics
    access: Access
