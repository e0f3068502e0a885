"""Evaluation sets in the shared format: corpus.jsonl and questions.jsonl in one folder."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .._errors import ConfigurationError
from ..kb import Document


@dataclass(frozen=True)
class Question:
    """One question with its acceptable answers and the corpus entries holding its evidence."""

    id: str
    question: str
    answers: list
    relevant_ids: list
    answerable: bool
    kind: str


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise ConfigurationError(f"{path} not found; a set folder holds corpus.jsonl and questions.jsonl")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError as exc:
                raise ConfigurationError(f"{path}:{number} is not valid JSON ({exc})") from None
    return rows


def load_set(folder: str | Path) -> tuple[list[Document], list[Question]]:
    """The corpus as documents (id = corpus entry id) and the questions of one set folder."""
    folder = Path(folder)
    corpus = [Document(id=str(row["id"]), text=row["text"], title=row.get("title") or "",
                       source=f"{folder.name}/{row['id']}") for row in _read_jsonl(folder / "corpus.jsonl")]
    questions = [Question(id=str(row["id"]), question=row["question"], answers=row.get("answers", []),
                          relevant_ids=[str(r) for r in row.get("relevant_ids", [])],
                          answerable=bool(row.get("answerable", True)), kind=row.get("kind", ""))
                 for row in _read_jsonl(folder / "questions.jsonl")]
    return corpus, questions
