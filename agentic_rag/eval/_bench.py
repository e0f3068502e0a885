"""The benchmark runner: linear against agentic on one evaluation set, resumable, deterministic
with the offline model. `agentic-rag bench` calls run_bench; _report.py turns records into metrics."""
from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from importlib import metadata
from pathlib import Path

from ..core import Config, ConfigurationError
from ..kb import FORMAT_VERSION, Embedder, KnowledgeBase, ingestion, make_embedder
from ..loop import format_trace, run_agentic_rag
from ..models import Meter, Model
from ..steps import check_faithfulness, generate_answer, hit_evidence, question_weights, verify_citations
from ..text import TOKENIZER_SETTINGS
from . import _conversations
from ._datasets import DOCS, Question, is_conversation_set, load_questions, load_set
from ._report import summarize, write_reports

MODES = ("linear", "agentic")


def cached_kb(folder: Path, embedder: Embedder | str, config: Config, cache: Path) -> KnowledgeBase:
    """The set's knowledge base, built once per corpus content, embedder and settings, then loaded.
    A docs/ set's key is every file's path and bytes and the loaders' version (see loader_version),
    so an edited file or a changed loader rebuilds. A build copies the vectors of chunks that earlier
    builds in the cache embedded with the same embedder (see KnowledgeBase.add_documents), so a
    changed corpus, or a loader that now reads a few pages differently, re-embeds only the new text."""
    embedder = make_embedder(embedder) if isinstance(embedder, str) else embedder
    index = config.index  # what a build fixes; search and run settings can differ between loads
    settings = json.dumps([embedder.name, index.chunk_size, index.chunk_overlap, TOKENIZER_SETTINGS, FORMAT_VERSION])
    key = hashlib.sha256(corpus_digest(folder).encode() + settings.encode()).hexdigest()[:16]
    tag = embedder.name.replace(":", "-").replace("/", "-")
    path = cache / f"{folder.name}-{tag}-{key}"
    if (path / "manifest.json").is_file():
        return KnowledgeBase.load(path, embedder, config=config)
    corpus, _ = load_set(folder)
    kb = KnowledgeBase(embedder, config)
    print(f"building the {folder.name} knowledge base ({len(corpus)} documents, {embedder.name}) ...",
          file=sys.stderr)
    earlier = [p for p in sorted(cache.glob(f"*-{tag}-*")) if (p / "manifest.json").is_file()]
    kb.add_documents(corpus, progress=True, reuse_from=earlier)
    kb.save(path)
    return kb


def corpus_digest(folder: Path) -> str:
    """A hash of what a set's knowledge base is built from: corpus.jsonl's bytes, or else the path and
    bytes of every file under docs/ and the version of the code that reads them."""
    digest = hashlib.sha256()
    if (folder / "corpus.jsonl").is_file() or not (folder / DOCS).is_dir():
        digest.update((folder / "corpus.jsonl").read_bytes())
        return digest.hexdigest()
    for path in sorted(p for p in (folder / DOCS).rglob("*") if p.is_file()):
        name, data = path.relative_to(folder).as_posix().encode(), path.read_bytes()
        digest.update(b"%d:%s%d:" % (len(name), name, len(data)) + data)
    digest.update(loader_version().encode())
    return digest.hexdigest()


def loader_version() -> str:
    """A hash of the loaders' source files (agentic_rag/kb/ingestion) and the versions of the readers
    they call, so that a change to how files are read rebuilds a docs/ set's knowledge base."""
    digest = hashlib.sha256()
    for path in sorted(_INGESTION.rglob("*.py")):
        digest.update(path.relative_to(_INGESTION).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    for package in _READERS:
        try:
            digest.update(f"{package}={metadata.version(package)};".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{package}=none;".encode())
    return digest.hexdigest()[:16]


_INGESTION = Path(ingestion.__file__).parent
# the readers the loaders may call: a new version of one can read the same file differently
_READERS = ("pypdf", "python-docx", "pdfminer.six", "pdfplumber", "pypdfium2", "pymupdf", "pytesseract")


def answer_linear(question: str, kb: KnowledgeBase, model: Model, config: Config) -> dict:
    """The reference design's baseline: hybrid search, the top passages, one generation; no loop,
    no grading, no abstention. Returns the fields of an agentic state that the metrics read."""
    meter, shown = Meter(model), config.run.evidence_k
    start = time.perf_counter()
    hits = kb.search(question, k=max(10, shown))
    pool = [hit_evidence(h) for h in hits]
    weights = question_weights(question, kb.term_weights(question))
    draft = generate_answer(question, pool[:shown], meter, (), weights, embedder=kb.embedder)
    answer, citations, _ = verify_citations(draft.answer, pool[:shown])
    return {"answer": answer, "abstained": False, "citations": citations, "evidence": pool, "stop_reason": "linear",
            "round": 1, "trace_line": "search -> generate", "usage": meter.usage,
            "timings_ms": {"total": (time.perf_counter() - start) * 1000}}


def run_question(mode: str, q: Question, kb: KnowledgeBase, model: Model, config: Config) -> dict:
    """One question in one mode, as a results.jsonl record."""
    if mode == "linear":
        state = answer_linear(q.question, kb, model, config)
    else:
        state = dict(run_agentic_rag(q.question, kb, model, (), config))
    return state_record(mode, q, state, q.question, model, config)


def run_conversation(mode: str, q: Question, kb: KnowledgeBase, model: Model, config: Config) -> dict:
    """One conversation's last turn in one of the conversation modes, as a results.jsonl record: a
    single question's fields plus the question the system was given (`asked`), its `standalone` and,
    in the conversation mode, the earlier turns as the system answered them."""
    state, asked, extra = _conversations.run_turn(mode, q, kb, model, config)
    return {**state_record(mode, q, state, state["standalone"], model, config), "asked": asked,
            "standalone": state["standalone"], **extra}


def state_record(mode: str, q: Question, state: dict, asked: str, model: Model, config: Config) -> dict:
    """A run's state as a results.jsonl record: what the metrics read, and the judge's faithfulness
    of the answer to the question `asked` (the judge in use, outside the counted usage)."""
    shown = state["evidence"][:config.run.evidence_k]
    faithfulness = None
    if state["answer"] and not state["abstained"]:
        faithfulness = check_faithfulness(asked, state["answer"], shown, model).score
    return {"mode": mode, "id": q.id, "question": q.question, "kind": q.kind, "answerable": q.answerable,
            "answer": state["answer"], "abstained": state["abstained"], "stop_reason": state["stop_reason"],
            "abstain_reason": state.get("abstain_reason", ""), "grade": (state.get("grade") or {}).get("score"),
            "rounds": state["round"], "ranking": [e["doc_id"] for e in state["evidence"]],
            "pool_size": len(shown) if mode == "linear" else len(state["evidence"]),
            "evidence": [e["doc_id"] for e in shown], "citations": [c["doc_id"] for c in state["citations"]],
            "cited_pages": [[c["doc_id"], c.get("page")] for c in state["citations"]],
            "first_cited": first_cited(state["answer"], state["citations"]),
            "trace": format_trace(state) if "trace" in state else state["trace_line"],  # the baseline has no trace
            "usage": {k: v for k, v in state["usage"].items() if k != "by_task"},
            "ms": round(state["timings_ms"]["total"], 1), "faithfulness": faithfulness}


def first_cited(answer: str, citations: list[dict]) -> str | None:
    """The document of the answer's first citation marker: what a reader checks first."""
    marker = re.search(r"\[(\d+)\]", answer)
    by_n = {c["n"]: c["doc_id"] for c in citations}
    return by_n.get(int(marker.group(1))) if marker else None


def half_of(question_id: str) -> int:
    """1 or 2, by a stable hash of the question id: the same id falls in the same half in every set
    and on every machine, so settings can be chosen by one half's numbers and checked on the other's."""
    return 1 + hashlib.sha256(question_id.encode("utf-8")).digest()[0] % 2


def run_bench(folder: Path, modes: list[str], out: Path, model: Model, config: Config,
              embedder: Embedder | str = "hashing",
              limit: int | None = None, cache: Path | None = None, half: int | None = None) -> dict:
    """Run every question (of one half, if given; skipping those already in out/results.jsonl) and
    write the reports. On a conversation set (rows with turns) the modes are the conversation modes
    (see _conversations.conversation_modes) and every figure is the last turn's."""
    out.mkdir(parents=True, exist_ok=True)
    questions = [q for q in load_questions(folder) if half is None or half_of(q.id) == half][:limit]
    conversations = is_conversation_set(questions)
    if conversations:
        modes, run = _conversations.conversation_modes(modes), run_conversation
    elif not set(modes) <= set(MODES):
        raise ConfigurationError(f"unknown bench mode {sorted(set(modes) - set(MODES))[0]!r}; "
                                 f"pass {' or '.join(MODES)}")
    else:
        run = run_question
    kb = cached_kb(folder, embedder, config, cache or out / "kb-cache")
    results = out / "results.jsonl"
    done = {(r["mode"], r["id"]) for r in _read(results)}
    with results.open("a", encoding="utf-8") as sink:
        for mode in modes:
            for n, q in enumerate(questions, 1):
                if (mode, q.id) not in done:
                    sink.write(json.dumps(run(mode, q, kb, model, config), ensure_ascii=False) + "\n")
                    sink.flush()
                print(f"\r{folder.name} {mode} {n}/{len(questions)}", end="", file=sys.stderr, flush=True)
            print(file=sys.stderr)
    wanted = {q.id for q in questions}
    records = [r for r in _read(results) if r["id"] in wanted and r["mode"] in modes]
    if conversations:
        metrics = _conversations.summarize_modes(records, questions, modes)
        write_reports(metrics, out, folder.name, half, model.name, kb.embedder.name,
                      what=f"the last turn of each conversation, {', '.join(modes)} (agentic runs)",
                      notes=_conversations.report_notes(modes), extra_rows=("condensed", "earlier_correct",
                                                                        "model_calls_all_turns"))
    else:
        metrics = {mode: summarize([r for r in records if r["mode"] == mode], questions) for mode in modes}
        write_reports(metrics, out, folder.name, half, model.name, kb.embedder.name)
    return metrics


def _read(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
