"""Evaluation sets in the shared format: questions.jsonl beside either corpus.jsonl (passages, which
questions name by relevant_ids) or docs/ (real files, read with load_documents as a user would, which
questions name by their `source` file and page). A conversation set's rows also hold `turns` (the
conversation, its last user turn the question), `standalone` (the question written out) and
`history_answers` (the earlier turns' gold answers, for a labelled diagnostic only)."""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from ..core import ConfigurationError
from ..kb import Document, load_documents


@dataclass(frozen=True)
class Question:
    """One question with its acceptable answers and the corpus entries holding its evidence."""

    id: str
    question: str
    answers: list
    relevant_ids: list
    answerable: bool
    kind: str
    source: dict | None = None  # a docs/ set's {"file": "docs/...", "page": 1-based or None, "section": ...}
    turns: tuple = ()  # a conversation set's turns as messages, the last one the user's question
    standalone: str = ""  # a conversation set's last question with its reference written out
    history_answers: tuple = ()  # the gold answers of the earlier user turns: never shown to the system

    @property
    def source_file(self) -> str | None:
        """The document id of the file holding the evidence (its path inside docs/), if the set names one."""
        file = (self.source or {}).get("file")
        return file.removeprefix(f"{DOCS}/") if file else None

    @property
    def source_page(self) -> int | None:
        """The 1-based physical page of a PDF's evidence, if the set names one."""
        page = (self.source or {}).get("page")
        return page if isinstance(page, int) and not isinstance(page, bool) else None


DOCS = "docs"  # a set's folder of real files; its files' document ids are their paths inside it


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise ConfigurationError(f"{path} not found; a set folder holds questions.jsonl and corpus.jsonl or docs/")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError as exc:
                raise ConfigurationError(f"{path}:{number} is not valid JSON ({exc})") from None
    return rows


def load_set(folder: str | Path) -> tuple[list[Document], list[Question]]:
    """The documents and the questions of one set folder: corpus.jsonl's passages (id = corpus entry
    id) or, without one, the files under docs/ as load_documents reads them (id = path inside docs/).
    A question's relevant_ids are the corpus entries it names, or the file its source names."""
    folder = Path(folder)
    if not (folder / "corpus.jsonl").is_file() and (folder / DOCS).is_dir():
        corpus = load_documents(folder / DOCS).documents
    else:
        corpus = [Document(id=str(row["id"]), text=row["text"], title=row.get("title") or "",
                           source=f"{folder.name}/{row['id']}") for row in _read_jsonl(folder / "corpus.jsonl")]
    return corpus, load_questions(folder)


def load_questions(folder: str | Path) -> list[Question]:
    """The questions of one set folder (see load_set)."""
    path = Path(folder) / "questions.jsonl"
    questions = []
    for number, row in enumerate(_read_jsonl(path), 1):
        source = row.get("source") if isinstance(row.get("source"), dict) else None
        q = Question(id=str(row["id"]), question=row["question"], answers=row.get("answers", []),
                     relevant_ids=[str(r) for r in row.get("relevant_ids", [])],
                     answerable=bool(row.get("answerable", True)), kind=row.get("kind", ""), source=source)
        if not q.relevant_ids and q.source_file:
            q = replace(q, relevant_ids=[q.source_file])
        if "turns" in row:
            q = replace(q, turns=_turns(row["turns"], f"{path}:{number}"), standalone=str(row.get("standalone") or ""),
                        history_answers=tuple(row.get("history_answers") or ()))
        questions.append(q)
    if len({bool(q.turns) for q in questions}) > 1:
        raise ConfigurationError(f"{path} mixes conversations (rows with turns) and single questions; "
                                 f"give each kind its own set folder")
    return questions


def is_conversation_set(questions: list[Question]) -> bool:
    """True when the set's rows are conversations (they hold turns)."""
    return bool(questions) and all(q.turns for q in questions)


def _turns(turns: object, where: str) -> tuple:
    """A row's turns, checked: user and assistant messages ending with the user's question."""
    fix = 'give turns as [{"role": "user", "content": "..."}, {"role": "assistant", "content": null}, ...]'
    if not isinstance(turns, list) or not turns:
        raise ConfigurationError(f"{where}: turns is not a list of messages; {fix}")
    for turn in turns:
        if not isinstance(turn, dict) or turn.get("role") not in ("user", "assistant") or \
                (turn["role"] == "user" and not (isinstance(turn.get("content"), str) and turn["content"].strip())):
            raise ConfigurationError(f"{where}: a turn is not a user message with text or an assistant message; {fix}")
    if turns[-1]["role"] != "user":
        raise ConfigurationError(f"{where}: the last turn is not the user's question; {fix}")
    return tuple({"role": t["role"], "content": t.get("content")} for t in turns)
