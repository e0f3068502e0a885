"""The benchmark on a conversation set: the last turn of each conversation answered four ways, all of
them agentic runs, so that what the history gives (and what a wrong earlier turn costs) can be read
off one report. The scoring is the single-question bench's (summarize), on the last turn only."""
from __future__ import annotations

from ..core import Config, ConfigurationError
from ..kb import KnowledgeBase
from ..loop import Conversation, run_agentic_rag
from ..models import Model
from ._answers import answer_correct
from ._datasets import Question
from ._metrics import bootstrap_ci
from ._report import summarize

MODES = ("conversation", "conversation_gold", "no_history", "standalone")
EXPLAINED = {
    "conversation": "each user turn asked in order through a Conversation; the earlier assistant turns are the "
                    "system's own replies, so a mistake in an earlier turn carries over (the real case)",
    "conversation_gold": "the last question with a history whose assistant turns are the earlier turns' gold "
                         "answers (plain messages, no evidence): a diagnostic of the condense step alone",
    "no_history": "the last question alone, as asked (what a system without history does)",
    "standalone": "the question written out with its reference, alone (the ceiling)",
}


def conversation_modes(modes: list[str]) -> list[str]:
    """The modes a conversation set runs for the bench's `modes`: the conversation modes named, else
    all four for "agentic" (so --mode both runs the four: a linear run has no history to use).
    --mode linear alone is refused with a line that says what to pass."""
    named = [m for m in modes if m in MODES]
    unknown = [m for m in modes if m not in MODES and m not in ("linear", "agentic")]
    if unknown:
        raise ConfigurationError(f"unknown bench mode {unknown[0]!r}; a conversation set runs {', '.join(MODES)}")
    if named:
        return named
    if "agentic" in modes:
        return list(MODES)
    raise ConfigurationError("a conversation set is benched with agentic runs only (a linear run has no history); "
                             "pass --mode agentic or --mode both")


def gold_history(q: Question) -> list[dict]:
    """The conversation before the last question, each assistant turn filled with the gold answer (its
    first alias) of the user turn before it: plain messages, no evidence. Only conversation_gold
    reads history_answers."""
    history, asked = [], -1
    for turn in q.turns[:-1]:
        if turn["role"] == "user":
            asked += 1
            history.append({"role": "user", "content": turn["content"]})
        else:
            gold = q.history_answers[asked] if 0 <= asked < len(q.history_answers) else ""
            while isinstance(gold, (list, tuple)):  # a list of aliases (or of parts): the first
                gold = gold[0] if gold else ""
            history.append({"role": "assistant", "content": str(gold)})
    return history


def run_turn(mode: str, q: Question, kb: KnowledgeBase, model: Model, config: Config) -> tuple[dict, str, dict]:
    """(state, asked, extra): the last turn's state in one mode, the question the system was given
    for it, and what the record adds (the earlier turns in the conversation mode)."""
    extra: dict = {}
    if mode == "conversation":
        conv, earlier, calls = Conversation(kb, model, (), config), [], 0
        user_turns = [t["content"] for t in q.turns if t["role"] == "user"]
        for question in user_turns[:-1]:
            turn = conv.ask(question)
            earlier.append({"question": question, "standalone": turn["standalone"], "answer": turn["answer"],
                            "abstained": turn["abstained"], "model_calls": turn["usage"]["model_calls"]})
            calls += turn["usage"]["model_calls"]
        state: dict = dict(conv.ask(user_turns[-1]))
        extra = {"earlier": earlier, "model_calls_all_turns": state["usage"]["model_calls"] + calls}
        asked = user_turns[-1]
    elif mode == "conversation_gold":
        asked = q.question
        state = dict(run_agentic_rag(asked, kb, model, (), config, history=gold_history(q)))
    elif mode == "no_history":
        asked = q.question
        state = dict(run_agentic_rag(asked, kb, model, (), config))
    elif mode == "standalone":
        asked = q.standalone or q.question
        state = dict(run_agentic_rag(asked, kb, model, (), config))
    else:
        raise ConfigurationError(f"unknown conversation mode {mode!r}; pass one of {', '.join(MODES)}")
    return state, asked, extra


def summarize_modes(records: list[dict], questions: list[Question], modes: list[str]) -> dict:
    """summarize for each mode, plus `condensed` (the share of last turns whose standalone differs
    from the question the system was given) and, for the conversation mode, model_calls_all_turns
    (model calls per conversation, every turn counted; model_calls is the last turn's) and
    earlier_correct (the share of conversations whose earlier turns the system answered right, by
    history_answers: scored here, after the runs, never shown to the system)."""
    gold = {q.id: q for q in questions}
    metrics = {}
    for mode in modes:
        mine = [r for r in records if r["mode"] == mode]
        metrics[mode] = summarize(mine, questions)
        metrics[mode]["condensed"] = (sum(r["standalone"] != r["asked"] for r in mine) / len(mine)) if mine else None
        calls = [r["model_calls_all_turns"] for r in mine if "model_calls_all_turns" in r]
        metrics[mode]["model_calls_all_turns"] = sum(calls) / len(calls) if calls else None
        right = [float(_earlier_right(r["earlier"], gold[r["id"]].history_answers)) for r in mine if "earlier" in r]
        metrics[mode]["earlier_correct"] = sum(right) / len(right) if right else None
        metrics[mode]["earlier_correct_ci"] = bootstrap_ci(right) if right else None
    return metrics


def _earlier_right(earlier: list[dict], answers: tuple) -> bool:
    """True when every earlier turn was answered (not abstained) with its gold answer."""
    return len(earlier) == len(answers) and all(
        not turn["abstained"] and answer_correct(turn["answer"], [[a] if isinstance(a, str) else a])
        for turn, a in zip(earlier, answers, strict=True))


def report_notes(modes: list[str]) -> list[str]:
    """The lines a conversation report opens with: what is scored and what each mode run is."""
    return ["Every figure is the last turn's: its answer against the set's answers, its evidence against the "
            "last turn's relevant_ids. The conversation modes are all agentic runs (--mode linear is not run on a "
            "conversation set: a linear run has no history); model_calls is per last turn, model_calls_all_turns per "
            "conversation; condensed is the share of last turns whose standalone differs from the question given; "
            "earlier_correct the share of conversations whose earlier turns the system answered right (scored "
            "by history_answers after the run).",
            "", *[f"- `{mode}`: {EXPLAINED[mode]}." for mode in modes]]
