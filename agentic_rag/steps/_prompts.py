"""Prompt templates and the pure functions that render them into chat messages."""
from __future__ import annotations

import json
from typing import Any

SYSTEM = ("You are one step of a retrieval-augmented question-answering agent. Use only the evidence "
          "given. Reply with a single JSON object that fits the schema given; no other text.")

TEMPLATES = {
    "condense": ("Rewrite the user's last question so that it stands alone, without the conversation: put in "
                 "what each pronoun or ellipsis refers to (the subject of an earlier question, or what an earlier "
                 "answer named), and change nothing else. Keep its language. A question that already stands "
                 "alone comes back unchanged. If the reference could be read two ways, give the other "
                 "standalone forms in readings (at most 2).\n\n"
                 "Conversation so far:\n{history}\nDocuments found for the earlier question:\n{topics}\n"
                 "Last question: {question}"),
    "route": ("Decide how to handle the question.\n"
              "- direct: only for questions that need no fact from the knowledge base (greetings, "
              "translation); never for a factual question.\n"
              "- tool: when one of the tools answers it (arithmetic goes to the calculator); give the "
              "tool name and its arguments, which may come from the evidence so far.\n"
              "- multi_hop: comparisons, several parts, or a fact that needs another fact first.\n"
              "- vector: any other question the knowledge base should answer.\n"
              "Attach metadata filters only when the question names a year, version or document type.\n\n"
              "Question: {question}\nTools:\n{tools}\nEvidence so far:\n{evidence}"),
    "rewrite": ("The search for this question did not find enough. Write one new search query that keeps "
                "the question's meaning and aims at what is missing. Do not repeat a query already tried.\n\n"
                "Question: {question}\nMissing: {missing}\nAlready tried:\n{tried}\nEvidence so far:\n{evidence}"),
    "decompose": ("Split the question into at most 5 search queries that together answer it. Give each "
                  "its depends_on: the indexes of queries whose answers it needs first (a bridge hop "
                  "waits for the hop it needs). Do not repeat a query already tried.\n\n"
                  "Question: {question}\nAlready tried:\n{tried}\nEvidence so far:\n{evidence}"),
    "grade": ("Grade whether the evidence is enough to answer the question. Check concretely: does it "
              "name the entities asked about, and does it hold the kind of answer asked for (a date, a "
              "number, a name, a place, yes or no)? Evidence that is not about the question's subject at all "
              "scores 0, however many words it shares with it. A heading, a table-of-contents line, or a "
              "sentence that only restates the question does not answer it: evidence made only of such lines is "
              "not sufficient, however well it matches. Score in [0, 1]; list what is missing.\n\n"
              "Question: {question}\nEvidence:\n{evidence}"),
    "generate": ("Answer the question from the evidence only, in 1 to 3 sentences, citing each claim "
                 "with its evidence number like [1]. Where sources disagree, say so and cite both. Never answer "
                 "with a heading, a table-of-contents line or a restatement of the question. If the "
                 "evidence does not hold the answer, say that. With no evidence at all (a greeting, a translation, "
                 "or a message that asks nothing), reply briefly and ask for a question if none was asked.{grading}\n\n"
                 "Question: {question}\nEvidence:\n{evidence}"),
    "judge": ("For each sentence of the answer, decide whether the evidence supports it. Score = share "
              "of supported sentences. List the unsupported sentences verbatim. complete = the answer "
              "addresses every part of the question.\n\nQuestion: {question}\nAnswer: {answer}\n"
              "Evidence:\n{evidence}"),
    "extract": ("List the facts this passage states as subject-relation-object triples, with subjects and objects "
                "written as the passage names them (people, organisations, places, works, products, dates).\n\n"
                "Title: {title}\nPassage: {text}"),
    "repair": ("Remove the unsupported claims from the answer. Keep the supported sentences and their "
               "citations; never add anything; the result must be shorter.\n\nQuestion: {question}\n"
               "Answer: {answer}\nUnsupported: {unsupported}\nEvidence:\n{evidence}"),
}


GRADING = (" Also grade the evidence as a separate judge would, before relying on it: evidence_score in [0, 1] "
           "says whether it is enough to answer (does it name the entities asked about and hold the kind of "
           "answer asked for; evidence not about the question's subject scores 0; a heading, a table-of-contents "
           "line or a sentence that only restates the question does not answer it, and evidence made only of such "
           "lines is not sufficient), missing lists what it lacks, grade_reason says why.")


# before the application's own instructions (a chat's system message), when it gives some
INSTRUCTIONS = ("The application asks the answer to follow these instructions; they never override the rules "
                "above (evidence only, citations, the JSON reply):")


def format_evidence(evidence: list[dict]) -> str:
    """Number the evidence [1]..[n] as the answer must cite it."""
    if not evidence:
        return "(none)"
    return "\n".join(f"[{n}] ({item.get('title') or item.get('source', '')}) {item['text']}"
                     for n, item in enumerate(evidence, 1))


def render(task: str, schema: dict, **facts: Any) -> list[dict]:
    """The chat messages for one task: the system rules (and the application's `instructions`, when
    the facts hold some), then the filled template and the schema."""
    values = {k: format_evidence(v) if k == "evidence" else
              ("\n".join(f"- {x}" for x in v) or "(none)") if isinstance(v, list) else
              json.dumps(v, ensure_ascii=False) if isinstance(v, dict) else v
              for k, v in facts.items()}
    user = TEMPLATES[task].format_map(_Blank(values))
    given = facts.get("instructions")
    given = [{"role": "system", "content": f"{INSTRUCTIONS}\n{given}"}] if given else []
    return [{"role": "system", "content": SYSTEM}, *given,
            {"role": "user", "content": f"{user}\n\nJSON schema:\n{json.dumps(schema, ensure_ascii=False)}"}]


class _Blank(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "(none)"
