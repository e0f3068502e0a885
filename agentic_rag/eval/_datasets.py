"""Evaluation sets in the shared format: questions.jsonl beside either corpus.jsonl (passages, which
questions name by relevant_ids) or docs/ (real files, read with load_documents as a user would, which
questions name by their `source` file and page)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .._errors import ConfigurationError
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
    questions = []
    for row in _read_jsonl(Path(folder) / "questions.jsonl"):
        source = row.get("source") if isinstance(row.get("source"), dict) else None
        q = Question(id=str(row["id"]), question=row["question"], answers=row.get("answers", []),
                     relevant_ids=[str(r) for r in row.get("relevant_ids", [])],
                     answerable=bool(row.get("answerable", True)), kind=row.get("kind", ""), source=source)
        if not q.relevant_ids and q.source_file:
            q = Question(q.id, q.question, q.answers, [q.source_file], q.answerable, q.kind, source)
        questions.append(q)
    return questions
