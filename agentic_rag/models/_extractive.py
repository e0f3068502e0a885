"""The offline model's judging and answering rules: grade, generate, judge, repair. Answers are
extractive: sentences quoted from the evidence, each with its citation."""
from __future__ import annotations

import re

from ..core import Answer, Faithfulness, Grade
from ..kb.embedders import Embedder, embedder_trait
from ..text import (
    FRAMING,
    GREETING,
    NUMBER,
    absent_terms,
    answer_type,
    answer_windows,
    asked_entities,
    candidates,
    cited_support,
    coverage,
    evidence_texts,
    has_answer_type,
    has_cjk,
    has_content,
    hop_levels,
    is_bridge_question,
    key_terms,
    missing_parts,
    restates,
    sentences,
    tokenize,
)

# a clause ends after a Chinese clause mark, or a Latin one before a space (not inside a URL or 1,000)
_CLAUSE = re.compile(r"(?<=[，；：])|(?<=[,;:])(?=\s)")
# absent key terms with this share of the question's weight: off the subject. With the other refusal
# rules, on offkb_en and offkb_zh: abstain recall 1.000 and 0.919 at 0.042 and 0.022 false abstentions
# on the questions it was chosen by, 1.000 and 0.735 at 0.038 and 0.000 on the held-out ones
# (docs/benchmarks.md, "Refusing what the knowledge base does not hold")
OFF_TOPIC_SHARE = 0.5
# kinds of answer whose form tells them (digits, a date, a path): the grade counts the question's terms only
# beside one. A name or a place has no such form in Chinese (冠军 may be a team, 主演 a film's cast).
TELLS_KIND = frozenset({"number", "date", "file"})
MAX_SENTENCE = 160  # characters; a longer sentence is cut to its best run of clauses


def grade(inputs: dict) -> Grade:
    """Score = idf-weighted key-term coverage of the best window that holds a thing of the asked
    kind (0.6; any window for a kind its form does not tell, TELLS_KIND; half for a window without a
    number the question names) and of all the evidence (0.15), the
    share of named things found (0.1) and whether such a window exists (0.15), less 0.3 times the
    idf-weighted share of key terms found nowhere in the evidence. Windows are two neighbouring
    candidates under their passage's title (answer_windows): headings, contents lines and lines that
    only restate the question hold no answer, so evidence made of them grades low. Score 0 when the
    evidence is off the subject: it lacks two or more key terms carrying half the question's weight
    (lexical.absent_terms) and does not hold every name the question asks about."""
    question, evidence, weights = inputs["question"], inputs.get("evidence", []), inputs.get("weights") or None
    terms, names, kind = key_terms(question), asked_entities(question), answer_type(question)
    if evidence and not about_subject(question, evidence):
        return Grade(score=0.0, sufficient=False, missing=names[:5], by="model",
                     reason=f"no passage is about {', '.join(names[:3])}, which the question asks about")
    texts = evidence_texts(evidence)
    pool = "\n".join(texts)
    windows = [w for item in evidence for w in answer_windows(question, item["text"], item.get("title", ""))]
    window_cov = max((coverage(terms, w, weights) for w in windows), default=0.0)
    numbers = [t for t in terms if NUMBER.fullmatch(t)]  # a year, an edition: no paraphrase can stand in for one
    typed = any(has_answer_type(kind, w, question) for w in windows)
    typed_cov = max((coverage(terms, w, weights) * (1.0 if set(numbers) <= set(tokenize(w)) else 0.5)
                     for w in windows if kind not in TELLS_KIND or has_answer_type(kind, w, question)), default=0.0)
    found = [n for n in names if n.casefold() in pool.casefold()]
    name_cov = len(found) / len(names) if names else 1.0
    present = set(tokenize(pool))
    absent = absent_terms(question, terms, present.__contains__)
    weight = (lambda t: weights.get(t, 1.0)) if weights else (lambda t: 1.0)
    absent_share = sum(map(weight, absent)) / (sum(map(weight, terms)) or 1.0)
    if len(absent) >= 2 and absent_share >= OFF_TOPIC_SHARE and not (names and name_cov == 1):
        reason = (f"the evidence is not about the question: it lacks {', '.join(absent[:5])} "
                  f"({absent_share:.0%} of the key terms' weight)" + (" and a name it asks about" if names else ""))
        return Grade(score=0.0, sufficient=False, missing=absent[:5], by="model", reason=reason)
    score = max(0.0, 0.6 * typed_cov + 0.15 * (coverage(terms, pool, weights) if evidence else 0) + 0.1 * name_cov
                + 0.15 * typed - 0.3 * absent_share)
    missing = [n for n in names if n not in found] + absent[:5]
    if not typed and kind != "other":
        missing.append(f"a {kind} answer")
    return Grade(score=round(min(score, 1.0), 3), sufficient=score >= inputs.get("threshold", 0.6), missing=missing,
                 reason=_grade_reason(question, evidence, terms, kind, window_cov, typed_cov, name_cov, absent_share),
                 by="model")


def _grade_reason(question: str, evidence: list[dict], terms: list[str], kind: str, window_cov: float,
                  typed_cov: float, name_cov: float, absent_share: float) -> str:
    """The grade's reason: the figures, and what the evidence lacks when the question's terms stand
    only in headings or lines that restate it, or nowhere beside a thing of the asked kind."""
    figures = (f"terms {typed_cov:.2f} beside a {kind} answer, {window_cov:.2f} in one place, names {name_cov:.2f}, "
               f"absent {absent_share:.2f}")
    asked = "what it asks" if kind == "other" else f"a {kind}"
    framing = [p for item in evidence for p, role in candidates(item["text"])
               if role in FRAMING or restates(question, p)]
    held = [t for t in terms if any(t in tokenize(p) for p in framing)]
    if held and coverage(terms, " ".join(framing)) > window_cov + 0.2:
        return f"the passages mention {', '.join(held[:3])} only in headings or lines restating the question; " \
               f"none says {asked} ({figures})"
    if kind in TELLS_KIND and typed_cov < window_cov:
        near = [t for t in terms if t in set(tokenize(" ".join(evidence_texts(evidence))))][:3]
        return f"the passages mention {', '.join(near) or 'the subject'} but none says {asked} beside it ({figures})"
    return figures


def about_subject(question: str, evidence: list[dict]) -> list[dict]:
    """The evidence about what the question names: passages that hold every word of a name it asks
    about, tool results, and, hop by hop, passages whose title one of those mentions (a multi-hop
    question's bridge; hop_levels). A question without names keeps all of it."""
    levels = hop_levels(question, evidence)
    return [item for i, item in enumerate(evidence) if i in levels]


def _trim(sentence: str, terms: list[str], kind: str = "other", question: str = "") -> str:
    """A long sentence shrinks to the run of clauses that covers the most key terms, keeping a
    value of the asked kind when one is there."""
    if len(sentence) <= MAX_SENTENCE:
        return sentence
    clauses = [c for c in _CLAUSE.split(sentence) if c]
    best, best_cov = sentence[:MAX_SENTENCE], -1.0
    for i in range(len(clauses)):
        for j in range(i + 1, len(clauses) + 1):
            text = "".join(clauses[i:j])
            if len(text) > MAX_SENTENCE:
                break
            cov = coverage(terms, text) + 0.35 * (kind != "other" and has_answer_type(kind, text, question))
            if cov > best_cov:
                best, best_cov = text, cov
    return best.strip()


def _pieces(evidence: list[dict]) -> list[tuple[int, str, str]]:
    """What an answer may quote, each as (evidence number, its context, the piece): sentences, rows,
    list items and code lines; headings, contents lines and questions only frame them, and so does a
    table's header: a first row without a digit that another row follows ("| plan | price | storage
    |"), which names the columns of the rows under it and is their context with their heading."""
    out = []
    for n, item in enumerate(evidence, 1):
        heading, header = "", ""
        pieces = [(p, role) for p, role in candidates(item["text"]) if not set(p) <= set("|-: ")]
        for i, (piece, role) in enumerate(pieces):
            if role in FRAMING:
                heading = piece if role == "heading" else heading
                continue
            if role != "row":
                header = ""
            elif not header and not re.search(r"\d", piece) and i + 1 < len(pieces) and pieces[i + 1][1] == "row" \
                    and (i == 0 or pieces[i - 1][1] != "row"):
                header = piece
                continue
            out.append((n, f"{heading} {header}".strip(), piece))
    return out


def _scored(question: str, evidence: list[dict], weights: dict | None = None,
            similarity: dict[str, float] | None = None) -> list[tuple[float, int, str]]:
    """Candidate pieces, best first: idf-weighted coverage of the question's terms (with the title and
    heading above the piece), plus 0.35 for a thing of the asked kind the question does not already
    hold, plus SEMANTIC times the piece's similarity to the question when `similarity` has it (see
    similarities). A piece that only restates the question, holding no thing of the asked kind, is
    no candidate."""
    terms, kind = key_terms(question), answer_type(question)
    out = []
    for n, heading, piece in _pieces(evidence):
        piece = _trim(piece, terms, kind, question)
        cov = coverage(terms, f"{evidence[n - 1].get('title', '')} {heading} {piece}", weights)
        typed = cov >= TYPED_ABOUT and kind != "other" and has_answer_type(kind, piece, question)
        if restates(question, piece, evidence[n - 1].get("title", "")):
            continue
        sim = SEMANTIC * similarity.get(piece, 0.0) if similarity else 0.0
        out.append((cov + 0.35 * typed + sim + 0.05 / n, n, piece))
    return sorted(out, key=lambda x: -x[0])


ABOUT = 0.5      # share of the question's term weight a piece holds to be about what it asks on its own
TYPED_ABOUT = 0.3  # and to be near enough its subject that a thing of the asked kind in it counts (a number
                   # beside other words answers nothing); 0, 0.3 and 0.5 measured on the selection splits
                   # (docs/benchmarks.md, "Saying what the documents do not say")
SEMANTIC = 1.0   # weight of the embedder's similarity beside the lexical score
RANKED = 12      # candidates the embedder ranks: the best by the lexical score, embedded in one batch


def similarities(question: str, evidence: list[dict], embedder: Embedder | None,
                 weights: dict | None = None) -> dict[str, float]:
    """The embedder's similarity of the question to each of the RANKED best candidates by the lexical
    score, rescaled to 0..1 among them (a dense embedder's cosines crowd a narrow band). Nothing
    without a dense embedder: a sparse one (hashing) is the lexical score again."""
    if embedder is None or embedder_trait(embedder, "sparse"):
        return {}
    texts = list(dict.fromkeys(s for _, _, s in _scored(question, evidence, weights)[:RANKED]))
    if len(texts) < 2:
        return {}
    query = embedder_trait(embedder, "embed_query") or embedder.embed
    cos = embedder.embed(texts) @ query([question])[0]
    low, high = float(cos.min()), float(cos.max())
    return {t: (float(c) - low) / (high - low or 1.0) for t, c in zip(texts, cos, strict=True)}


def generate(inputs: dict) -> Answer:
    """The best candidates (one per part of the question, at most three), each cited. With a dense
    embedder in `inputs["embedder"]` (the knowledge base's), its similarity ranks them with the
    lexical score (similarities)."""
    question, evidence, weights = inputs["question"], inputs.get("evidence", []), inputs.get("weights") or None
    if not evidence:
        return _without_evidence(question)
    parts = inputs.get("parts") or [question]
    embedder = inputs.get("embedder")
    sims = {q: similarities(q, evidence, embedder, weights) for q in dict.fromkeys([question] + parts[:3])}

    scored: dict[str, list[tuple[float, int, str]]] = {}

    def ranked(q: str) -> list[tuple[float, int, str]]:  # scored once per question or part
        if q not in scored:
            scored[q] = _scored(q, evidence, weights, sims[q])
        return scored[q]

    single = len(parts) == 1
    chosen = _hop_chain(question, evidence, ranked(question)) if single and is_bridge_question(question) else []
    chained = bool(chosen)
    voted = _voted(question, evidence, ranked(question)) if single and not chained else None
    if voted:
        chosen.append(voted)
    for part in parts[:3] if not (voted or chained) else []:
        for score, n, s in ranked(part):
            if s not in {text for _, text in chosen} and score > 0.05 / n:
                chosen.append((n, s))
                break
    if single and chosen and not chained:  # a second sentence only for a part the first left out
        extra = _adds_part(question, chosen[0], ranked(question), weights)
        if extra:
            chosen.append(extra)
    if chosen and evidence[chosen[0][0] - 1].get("kind", "passage") != "passage":
        # a tool's result: quote the passage it drew on too, so the answer shows its basis
        basis = next(((n, s) for _, n, s in ranked(question) if evidence[n - 1].get("kind", "passage") == "passage"),
                     None)
        chosen = chosen[:1] + ([basis] if basis else [])
    if not chosen:
        return Answer(answer="", reason="no sentence of the evidence addresses the question")
    if single and not chained and (conflict := _disagreement(question, evidence, chosen[0])):
        return Answer(answer=conflict, reason="extractive: the sources disagree, both are quoted")
    text = " ".join(f"{with_list(evidence[n - 1]['text'], s)} [{n}]" for n, s in chosen)
    return Answer(answer=text, reason="extractive: sentences quoted from the evidence")


_LIST_LINE = re.compile(r"\s*(?:[-*•]|\d+[.)、])\s+\S|.+ \| ")  # a list item or a table row
MAX_LIST = 8  # lines a lead-in brings


def with_list(text: str, piece: str) -> str:
    """A lead-in that ends in a colon ("... one of the following storage classes:") with the list
    items or table rows that follow it in its passage, one a line (at most MAX_LIST): the lead-in
    alone says that there is an answer, not what it is."""
    if not piece.rstrip().endswith((":", "：")):
        return piece
    tail = re.split(r"\s+", piece.strip())[-6:]  # its last words: the piece was joined from wrapped lines
    found = re.search(r"\s+".join(map(re.escape, tail)), text)
    items: list[str] = []
    for line in text[found.end():].split("\n")[1:] if found else []:
        if line.strip():
            if not _LIST_LINE.match(line) or len(items) == MAX_LIST:
                break
            items.append(line.strip())
    return "\n".join([piece, *items])


def _without_evidence(question: str) -> Answer:
    """The reply to a question answered without the knowledge base: a request for a real question
    when it holds no content word, a greeting back, or a note that the offline model cannot answer
    what needs no evidence."""
    if GREETING.match(question):
        return Answer(answer="Hello! Ask me a question about the documents in the knowledge base. "
                             "(answered without consulting the knowledge base)", reason="greeting")
    if not has_content(question):
        return Answer(answer="请提出一个问题，例如知识库文档中的某个主题。（未查询知识库）" if has_cjk(question)
                      else "Please ask a question, for example about a topic of the documents in the knowledge "
                           "base. (the knowledge base was not consulted)", reason="no content word")
    return Answer(answer="The offline extractive model can only quote the knowledge base, and this "
                         "question does not need it; name a language model with --model for this. "
                         "(the knowledge base was not consulted)", reason="direct, offline")


def _adds_part(question: str, first: tuple[int, str], scored: list[tuple[float, int, str]],
               weights: dict | None = None) -> tuple[int, str] | None:
    """The best other candidate worth a second citation: one that holds half the key terms `first`
    left out, in the question's context (two or more of them, or in `first`'s passage, or beside a
    term `first` holds: one stray word in common is no part, "Backups are encrypted with separate
    keys" for a keyboard question); one scoring near the best that holds a thing of the asked kind (a package, a
    number) that `first` lacks; or one from another passage scoring near the best that is about what
    the question asks on its own (ABOUT of its term weight), a second reading of it."""
    terms, kind = key_terms(question), answer_type(question)
    said = set(tokenize(first[1]))
    left = absent_terms(question, terms, said.__contains__)  # a Chinese bigram across a word boundary is no part
    held = [t for t in terms if t in said]
    lacks = kind not in ("other", "yes_no") and not has_answer_type(kind, first[1], question)

    def adds(score: float, n: int, s: str) -> bool:
        near = score >= 0.8 * scored[0][0]
        return bool(left and coverage(left, s) >= 0.5 and (len(left) > 1 or n == first[0] or coverage(held, s) > 0)) \
            or (near and lacks and has_answer_type(kind, s, question)) \
            or (near and n != first[0] and coverage(terms, s, weights) >= ABOUT)

    return next(((n, s) for score, n, s in scored if s != first[1] and adds(score, n, s)), None)


def _hop_chain(question: str, evidence: list[dict], scored: list[tuple[float, int, str]]) -> list[tuple[int, str]]:
    """A nested question's answer along its hops (hop_levels): the best candidate of a passage past
    the question's own names (the last hop holds what is asked), then, hop by hop back to those
    names, the best candidate of a nearer passage, one naming the farther passage's title where
    there is one (the bridge). [] when the evidence holds no passage past the question's names."""
    levels = hop_levels(question, evidence)
    far = next(((n, s) for score, n, s in scored if levels.get(n - 1, 0) >= 1 and score > 0.05 / n), None)
    if far is None:
        return []
    chain = [far]
    while (hop := levels[chain[-1][0] - 1]) > 0:
        title = set(tokenize(evidence[chain[-1][0] - 1].get("title", "")))
        nearer = [(n, s) for _, n, s in scored if levels.get(n - 1) == hop - 1]
        if not nearer:
            break
        chain.append(next(((n, s) for n, s in nearer if title <= set(tokenize(s))), nearer[0]))
    return chain


_VALUE = re.compile(r"\d+(?:[.,:]\d+)*\s*%?")


def _voted(question: str, evidence: list[dict], scored: list[tuple[float, int, str]]) -> tuple[int, str] | None:
    """For number and date questions: the value that most passages state beside the question's
    terms (noisy sources disagree; most agree on the truth), quoted in its best candidate (`scored`:
    the candidates ranked, _scored)."""
    if answer_type(question) not in ("number", "date"):
        return None
    if not scored:
        return None
    asked = set(_VALUE.findall(question))
    votes: dict[str, set[int]] = {}
    for score, n, s in scored:
        if score >= 0.6 * scored[0][0]:
            for value in set(_VALUE.findall(s)) - asked:
                votes.setdefault(value.strip(), set()).add(evidence[n - 1].get("doc_id", n))
    if not votes:
        return None
    value, sources = max(votes.items(), key=lambda kv: (len(kv[1]), kv[0]))
    if len(sources) < 2:
        return None  # no agreement to go by: the best sentence decides
    return next((n, s) for score, n, s in scored if value in s)


def _disagreement(question: str, evidence: list[dict], best: tuple[int, str]) -> str | None:
    """Another document's sentence that addresses the question as well, about the same asked thing
    (_same_attribute), but gives other numbers or dates: both are quoted and the disagreement is named."""
    if answer_type(question) not in ("number", "date"):
        return None
    scored = _scored(question, evidence)  # unweighted: the disagreement check compares like with like
    top = scored[0][0] if scored else 0
    values = set(_VALUE.findall(best[1])) - set(_VALUE.findall(question))
    for score, n, s in scored:
        other = set(_VALUE.findall(s)) - set(_VALUE.findall(question))
        if score >= 0.9 * top and evidence[n - 1]["doc_id"] != evidence[best[0] - 1]["doc_id"] \
                and values and other and not values & other and _same_attribute(question, best[1], s):
            lead = "来源说法不一：" if has_cjk(question) else "The sources disagree: "
            return f"{lead}{best[1]} [{best[0]}] {s} [{n}]"
    return None


def _same_attribute(question: str, a: str, b: str) -> bool:
    """Whether two sentences speak of the same asked thing: they hold the same of the question's key
    terms, and most of them ("the Pro plan costs $20" and "the Team plan costs $50" do not, for the
    Pro plan's price)."""
    terms = key_terms(question)
    held_a, held_b = (set(terms) & set(tokenize(x)) for x in (a, b))
    return held_a == held_b and len(held_a) >= max(1, 2 * len(terms) / 3)


def judge(inputs: dict) -> Faithfulness:
    """Share of answer sentences supported by the evidence they cite (or any, if uncited), and
    whether every part of the question is addressed."""
    answer, evidence = inputs["answer"], inputs.get("evidence", [])
    texts = evidence_texts(evidence)
    found = sentences(answer)
    unsupported = [s for s in found if cited_support(s, texts) < 0.6]
    missing = missing_parts(answer, evidence, inputs.get("parts", []), inputs.get("question", ""))
    score = 1.0 - len(unsupported) / len(found) if found else 0.0
    return Faithfulness(score=round(score, 3), unsupported=unsupported, complete=not missing, missing=missing,
                        by="model")


def repair(inputs: dict) -> Answer:
    """Drop the unsupported sentences; nothing is added."""
    drop = set(inputs.get("unsupported", []))
    kept = [s for s in sentences(inputs["answer"]) if s not in drop]
    return Answer(answer=" ".join(kept), reason=f"removed {len(drop)} unsupported sentences")
