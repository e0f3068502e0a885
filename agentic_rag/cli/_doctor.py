"""`agentic-rag doctor`: check the model configuration and say what is wrong and how to fix it."""
from __future__ import annotations

from ..core import AgenticRAGError, Answer, call_error, make_client
from ..kb import KnowledgeBaseBackend, open_kb, safe_url, saved_embedder, saved_vectors_count
from ..kb.embedders import OpenAIEmbedder
from ..models import ModelRequest, OpenAIChatModel
from ._display import counted


def run_doctor(settings: dict, kb: str | None = None) -> int:
    """Key, endpoint, chat models, embedding model and the knowledge base's dimension; 0 when all pass."""
    endpoint, problems = settings["endpoint"], 0

    def report(ok: bool, text: str, fix: str = "") -> None:
        nonlocal problems
        problems += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {text}{'' if ok or not fix else ' -> ' + fix}")

    print(f"endpoint: {endpoint.base_url or 'OpenAI (default)'}; chat model: {settings['name']}; "
          f"embedding model: {settings['embedding_model'] or '(none)'}")
    remote = settings["name"] != "offline" or settings["embedding_model"] or settings["per_task"]
    if not remote:
        print("ok   offline model: nothing to call; name a model with --model or AGENTIC_RAG_MODEL to check one")
    else:
        report(True, "API key set" if endpoint.api_key else "no API key (fine for Ollama or vLLM; OpenAI needs "
                                                            "AGENTIC_RAG_API_KEY or OPENAI_API_KEY)")
        try:
            names = [m.id for m in make_client(endpoint).models.list()]
            report(True, f"endpoint answers; {counted(len(names), 'model')} listed")
        except Exception as exc:
            report(False, f"endpoint does not answer: {call_error(exc, 'listing models', endpoint)}",
                   "check --base-url / AGENTIC_RAG_BASE_URL and that the server runs")
        for name in {settings["name"], *settings["per_task"].values()} - {"offline"}:
            try:
                OpenAIChatModel(name, endpoint).complete(ModelRequest(
                    task="generate", schema=Answer, inputs={},
                    messages=[{"role": "user", "content": 'Reply with the JSON object {"answer": "ok"}.'}]))
                report(True, f"chat model {name} answers with valid JSON")
            except Exception as exc:
                report(False, f"chat model {name}: {exc}", "check the model name and the key")
    dimension = None
    if settings["embedding_model"]:
        try:
            dimension = OpenAIEmbedder(settings["embedding_model"], endpoint,
                                       query_model=settings.get("embedding_query_model"),
                                       input_type=settings.get("embedding_input_type", False)).dimension
            report(True, f"embedding model {settings['embedding_model']} answers: {dimension} dimensions")
        except Exception as exc:
            report(False, f"embedding model {settings['embedding_model']}: {exc}", "check --embedding-model")
    if kb:
        shown = safe_url(kb)
        try:
            built = saved_embedder(kb) or _built_with(open_kb(kb))  # a folder's manifest: nothing to load
            same = dimension is None or built["dimension"] == dimension
            report(same, f"knowledge base {shown}: built with {built['name']} ({built['dimension']} dimensions)"
                   + ("" if same else f", but the embedding model gives {dimension}"),
                   "use the embedding model it was built with, or rebuild into a new --kb")
            counts = saved_vectors_count(kb)
            if counts is not None and counts[1] < counts[0]:  # said, not failed: an index may be filling them in
                report(True, f"knowledge base {shown}: {counts[1]} of {counts[0]} chunks have their vectors; the "
                             f"others are found by BM25 alone until an index fills them in (or agentic-rag fill "
                             f"--kb {shown}, if none is at it)")
        except (OSError, ValueError, KeyError, AgenticRAGError) as exc:
            report(False, f"knowledge base {shown} cannot be read ({exc})", "agentic-rag index PATH --kb DIR")
    print("all checks passed" if not problems else f"{problems} problem(s) found")
    return 0 if not problems else 1


def _built_with(kb: KnowledgeBaseBackend) -> dict:
    """The name and dimension of the embedder an opened knowledge base was built with."""
    try:
        return {"name": kb.embedder.name, "dimension": kb.embedder.dimension}
    finally:
        kb.close()
