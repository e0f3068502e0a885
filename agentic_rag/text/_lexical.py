"""The lexical layer the steps' deterministic checks and the offline model share: a question's key
terms, entities, expected answer type and shape (greeting, comparison, nested), and how well a
sentence is supported by evidence. Built on the tokenizer and name finder beside it."""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._names import mentions
from ._sentences import split_sentences
from ._tokenize import CJK, STOPWORDS, has_cjk, normalize, tokenize

Passage = Mapping[str, Any]  # an evidence item as the judges read it: its text, and its id and title when it has them

# words that shape a question but carry none of its content
_QUESTION_WORDS = frozenset("""
what which who whom whose when where why how many much does did do is are was were can could
will would should tell me please give list name about there any some one ones also other
vs versus compare compared comparison between difference differences differ
区别 差异 对比 比较 不同 异同 有何 何区
什么 哪个 哪些 哪里 哪儿 怎么 怎样 如何 多少 是否 为何 几个 请问 时候 多久 多长 何时 能否 可以
""".split())
# Chinese characters that only shape a sentence; a bigram holding one is not a content term
_CJK_FUNCTION = frozenset("吗呢吧啊么什哪谁怎样几是否的了在有和与及请问我你他她它这那个些吧为何呀哦嘛着过被把将从对")
# leading words an entity drops ("Is DK-200" -> DK-200), the pronoun I's contractions among them
_NOT_A_NAME = _QUESTION_WORDS | STOPWORDS | {f"i{a}{b}" for a in "'’" for b in ("m", "ve", "d", "ll")}

# a message that needs no fact from the knowledge base
GREETING = re.compile(r"^\s*(?:hi|hello|hey|thanks|thank you|good (?:morning|afternoon|evening)|你好|您好|谢谢|早上好|"
                      r"晚上好)\W*$", re.I)
TRANSLATION = re.compile(r"^\s*(?:translate|翻译)\b|(?:翻译成|translate (?:this|it)? ?(?:in)?to)\s*\w+", re.I)
COMPARISON = re.compile(r"对比|区别|差异|异同|不同|相比|比较|哪个更|哪一个更|\bvs\.?\b|versus|compare|comparison|"
                        r"difference|differ|\bboth\b|\beither\b|\bwhich (?:one|of the two)\b", re.I)
_RELATIVE = re.compile(r"\s(?:which|that|who|whose|whom|where)\s", re.I)
_ENUMERATION = re.compile(r"[、,，]|\band\b|和|与|及")
NUMBER = re.compile(r"\d+(?:\.\d+)*")  # a number as a key term: a year, an edition, a version

# What a question asks for, by its form (first match wins: "which file" before "where"), and below, what
# a text must hold to answer it. The technical kinds come first: documentation is asked for files,
# packages and commands as often as for numbers and names.
_WHICH = r"(?:which|what)(?: \w+)?"
ANSWER_TYPES = {
    "file": re.compile(rf"\b{_WHICH} (?:file|directory|folder|path)s?\b|(?:哪个|哪些|什么|哪一个)(?:配置)?"
                       r"(?:文件|目录|路径)|(?:存放|保存|存储)在?哪|在哪个目录", re.I),
    "package": re.compile(rf"\b{_WHICH} packages?\b|\bpackages? (?:do|should|must) (?:i|you|we) (?:need|install)|"
                          r"(?:哪个|哪些|什么|哪一个)(?:软件)?包|(?:装|安装)(?:哪个|什么|哪些)", re.I),
    "command": re.compile(rf"\b{_WHICH} (?:command|tool|program|utility|utilities)s?\b|"
                          r"(?:哪个|哪些|什么|哪一个|何种)(?:命令|工具|程序)", re.I),
    "date": re.compile(r"\bwhen\b|what (?:year|date|day|time|century)|which (?:year|date|day|century)|何时|什么时候|"
                       r"哪一?年|哪一?天|几月|几号|日期|时间\s*[？?]?\s*$|年份", re.I),
    "number": re.compile(r"how (?:many|much|long|old|far|big|large|high|tall)|what (?:percentage|number|amount)|"
                         r"多少|几个|几名|几人|几次|数量|人数|比例|金额|价格|上限|多长|多久|多大|"
                         r"[率额量价数]\s*(?:是|为)?\s*[？?]?\s*$", re.I),
    "person": re.compile(r"\bwho(?:m|se)?\b|which (?:person|author|actor|player|president|director)|谁|哪位|何人|"
                         r"(?:导演|作者|主演|冠军|得主|创始人|主席|总统)\s*(?:是)?\s*[？?]?\s*$", re.I),
    "place": re.compile(r"\bwhere\b|which (?:city|country|state|place|town|region|area|continent|province|"
                        r"server|site|website|host|mirror)|"
                        r"哪里|哪儿|在哪|何地|哪个(?:城市|国家|地区|省|网站|服务器|站点)|地点|举办地", re.I),
    "yes_no": re.compile(r"^(?:is|are|was|were|did|does|do|can|could|has|have|will)\b|吗[？?]?\s*$|是否|有没有|"
                         r"是不是", re.I),
}
_PATH = r"(?<![\w/:])(?:~|\.{1,2})?/[\w.+-]+(?:/[\w.*+-]*)+"
_HOST = r"https?://[^\s\"'”)]+|\b[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:org|com|net|edu|gov|io|cn|de|uk|fr|jp|ch)\b"
_NAME = r"[a-z][a-z0-9+.]*-[a-z0-9+.-]*[a-z0-9]"  # a lower-case hyphenated name: cups-bsd, ssh-keygen
_TYPE_EVIDENCE = {
    "file": re.compile(_PATH),
    "package": re.compile(rf"\b{_NAME}\b|\b[a-z][a-z0-9+.-]+(?=\s+packages?\b|\s*软件包|\s*\|)|"
                          r"(?<=package )[a-z][a-z0-9+.-]+|(?<=软件包 )[a-z][a-z0-9+.-]+|(?<=软件包)[a-z][a-z0-9+.-]+"),
    "command": re.compile(rf"\b[a-z][\w.+-]*\(\d\w?\)|[\"“][a-z][\w.+-]*(?: [^\"”]*)?[\"”]|(?:^|\s)[$#] [a-z][\w.+-]*|"
                          rf"\b{_NAME}\b|(?<=\s)--?[a-z][\w-]*"),
    "date": re.compile(r"\b(?:1[5-9]\d\d|20\d\d)\b|\d{1,2}月|\d{1,2}日|\d+年|\d{1,2}:\d\d|当天|次日|工作日|"
                       r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d|business day|same day|"
                       r"\b(?:in|by|since|until|from|of|around|about) \d{3,4}\b|\b\d{1,2}(?:st|nd|rd|th) century\b|"
                       r"世纪|\b(?:today|tomorrow|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", re.I),
    "number": re.compile(r"\d+(?:[.,]\d+)*\s*(?:%|‰|亿|万|千|百)?|\b(?:two|three|four|five|six|seven|eight|nine|ten|"
                         r"eleven|twelve|twenty|thirty|forty|fifty|hundred|thousand|million|billion|dozen)\b|"
                         r"[一二三四五六七八九十百千万两]+[个名人次台种位份条项倍年]", re.I),
    "person": re.compile(rf"\b[A-Z][a-z]+(?: [A-Z][a-z.]+)+\b|[{CJK}]{{2,4}}(?:先生|女士|教授|总统|主席)|"
                         rf"[{CJK}]{{2,3}}(?:说|表示|指出)"),
    "place": re.compile(rf"\b(?:in|at|from) [A-Z][a-z]+|[{CJK}]{{2,}}(?:省|市|县|国|州|区|岛|城)|{_HOST}|{_PATH}"),
}


_CJK_QUESTION = re.compile(r"什么时候|什么|哪一?[个些里儿年天位]?|怎么样?|怎样|如何|多少|多久|多长|是否|是不是|有没有|"
                          r"为什么|为何|几[个名人次月号]?|请问|[吗呢吧的了]")


def key_terms(text: str) -> list[str]:
    """The content tokens of a question, in order: words and numbers without question words,
    and Chinese bigrams without function characters (single characters only where alone).
    Chinese question words are cut out first, so no bigram straddles one (什么时候发货 -> 发货)."""
    terms = []
    text = _CJK_QUESTION.sub(" ", text)
    for token in dict.fromkeys(tokenize(text)):
        cjk = has_cjk(token)  # a token is all Chinese or holds none
        if token in _QUESTION_WORDS or (cjk and (set(token) & _CJK_FUNCTION)):
            continue
        if cjk and len(token) == 1 and re.search(f"{token}[{CJK}]|[{CJK}]{token}", text):
            continue  # part of a longer run: its bigrams say more
        terms.append(token)
    return terms


def has_content(question: str) -> bool:
    """Whether the question holds a content word: a key term with a letter or a Chinese character.
    Punctuation, function words ("的", "a") or a lone number ask nothing to look up."""
    return any(re.search(r"[^\W\d_]", t) for t in key_terms(question))


def absent_terms(question: str, terms: list[str], held: Callable[[str], bool]) -> list[str]:
    """The key terms for which `held(token)` is false. Chinese is written without spaces, so a
    bigram may straddle two words: it counts as absent only when it holds a character of a gap of
    two or more characters that no held bigram of the question covers (年假 of 年假政策 when only
    政策 is held). A one-character gap is a word boundary or a particle (录报 of 登录报错, 名成 of
    改名成苏镜宇)."""
    missing = set()
    for run in re.findall(f"[{CJK}]+", normalize(_CJK_QUESTION.sub(" ", question))):
        covered = [False] * len(run)
        for i in range(len(run) - 1):
            if held(run[i:i + 2]):
                covered[i] = covered[i + 1] = True
        for gap in re.finditer(r"0{2,}", "".join("1" if c else "0" for c in covered)):
            missing.update(run[gap.start():gap.end()])
    return [t for t in terms if not held(t) and not (has_cjk(t) and len(t) == 2 and not set(t) & missing)]


def entities(text: str) -> list[str]:
    """Names, titles, quotations, codes, versions and numbers mentioned in the text: the name
    finder's mentions (kb.names) without leading question words ("Is DK-200" -> DK-200) or a
    possessive (Taylor's -> Taylor). Unlike kb.names.names, a sentence's first word and a decimal
    count: a question names what it asks about anywhere."""
    found = []
    for _, words in mentions(text, _NOT_A_NAME, possessive=True):
        value = " ".join(words).lstrip("".join(_CJK_FUNCTION))
        if len(value) > 1:
            found.append(value)
    return list(dict.fromkeys(found))


def is_direct(question: str) -> bool:
    """A greeting or a translation request: needs no fact from the knowledge base."""
    return GREETING.search(question) is not None or TRANSLATION.search(question) is not None


def is_comparison(question: str) -> bool:
    """Comparison words, or two or more named things joined by an enumeration."""
    return bool(COMPARISON.search(question)) or (len(entities(question)) >= 2 and bool(_ENUMERATION.search(question)))


def relative_clause(question: str) -> re.Match | None:
    """A relative pronoun after the question's first two words ("the company which made X"); the
    leading interrogative of "From which country..." is not one."""
    words = re.match(r"\s*\S+\s+\S+", question)
    return _RELATIVE.search(question, words.end() if words else 0)


def is_nested(question: str) -> bool:
    """A question that needs a bridge fact first: a relative clause, or three 的 in a row of modifiers."""
    return relative_clause(question) is not None or question.count("的") >= 3


# where an English clause asks: a wh-word or an auxiliary opening it, after a preposition ("From which server")
_ASKS = re.compile(r"(?:^|(?<=[.?!,;:]\s))(?:(?:from|in|on|at|by|for|to|of|with|and|but|so|then)\s+)?"
                   r"(?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|did|does|do|can|could|has|have|"
                   r"will)\b", re.I)
_SUBORDINATE = frozenset({"when", "where"})  # they also join clauses: "Which shell runs when a script asks ...?"


def answer_type(question: str) -> str:
    """What kind of answer the question asks for: file, package, command, date, number, person, place,
    yes_no or other (the first kind of ANSWER_TYPES whose form the question has). A bare "when" or
    "where" asks only where it opens a sentence's asking clause (the last clause of the sentence
    that opens with a wh-word or an auxiliary), in a question that has one: inside that clause
    ("Which shell runs when a script asks for /bin/sh?") or in a clause before it ("When I ping, how
    many bytes ...?") it joins clauses and asks nothing."""
    question = question.strip()
    opens = set()
    for sentence in re.finditer(r"(?:[^.?!]|[.?!](?=\S))+[.?!]*", question):
        starts = list(_ASKS.finditer(question, sentence.start(), sentence.end()))
        if starts:
            last = starts[-1]
            opens |= {last.start(), last.end() - len(last.group(0).split()[-1])}
    for name, pattern in ANSWER_TYPES.items():
        if any(m.group(0).lower() not in _SUBORDINATE or not opens or m.start() in opens
               for m in pattern.finditer(question)):
            return name
    return "other"


def has_answer_type(kind: str, text: str, question: str = "") -> bool:
    """Whether the text holds something of the asked kind (a year for 'date', a number for
    'number'...) that the question itself does not already say."""
    pattern = _TYPE_EVIDENCE.get(kind)
    if pattern is None:
        return True
    asked = normalize(question)
    return any(m.group(0).strip() and normalize(m.group(0)).strip() not in asked for m in pattern.finditer(text))


def coverage(terms: list[str], text: str, weights: dict[str, float] | None = None) -> float:
    """Weighted share of the terms that occur in the text (1.0 for no terms)."""
    if not terms:
        return 1.0
    present = set(tokenize(text))
    weight = (lambda t: weights.get(t, 1.0)) if weights else (lambda t: 1.0)
    total = sum(weight(t) for t in terms)
    return sum(weight(t) for t in terms if t in present) / total if total else 1.0


def sentences(text: str) -> list[str]:
    """The text's sentences, stripped, without empty ones and without bare citation markers."""
    out: list[str] = []
    text = re.sub(r"(\[\d+\])(?!\s*\[)[ \t]*(?=\S)", "\\1\n\n", text)  # a citation ends its sentence
    for piece in split_sentences(text):
        piece = re.sub(r"^\s*(?:[-*•]|\d+[.)、])\s+", "", piece).strip()  # list markers
        leading = re.match(r"(?:\[\d+\]\s*)+", piece)
        if leading and out:  # a citation cut off after the full stop stays with its sentence
            out[-1] = f"{out[-1]} {leading.group(0).strip()}"
            piece = piece[leading.end():].strip()
        if re.sub(r"\[\d+\]|\W", "", piece):
            out.append(piece)
    return out


def evidence_texts(evidence: Sequence[Passage]) -> list[str]:
    """Each evidence item as the judges read it: its title above its text."""
    return [f"{item.get('title', '')}\n{item['text']}" for item in evidence]


def cited_support(sentence: str, texts: list[str]) -> float:
    """Support of a sentence by the evidence it cites as [n], or by all of it when it cites none."""
    return support(sentence, [texts[n - 1] for n in cited_numbers(sentence, texts)] or texts)


def support(sentence: str, evidence_texts: list[str]) -> float:
    """How much of the sentence the best single evidence text contains (share of its tokens)."""
    terms = [t for t in dict.fromkeys(tokenize(re.sub(r"\[\d+\]", " ", sentence)))]
    if not terms:
        return 1.0
    return max((coverage(terms, text) for text in evidence_texts), default=0.0)


def same_text(a: str, b: str) -> bool:
    """Whether two queries are the same once case, width and spacing are ignored."""
    return " ".join(normalize(a).split()) == " ".join(normalize(b).split())


def bridge_entities(question: str, evidence: Sequence[Passage], limit: int = 3) -> list[str]:
    """Names in the best evidence that the question does not mention: where the next hop starts."""
    asked = set(tokenize(question))
    found: Counter[str] = Counter()
    for rank, item in enumerate(evidence[:4]):
        names = ([item["title"]] if item.get("title") else []) + entities(item["text"])
        for name in names:
            if name and not set(tokenize(name)) <= asked:
                found[name] += 1.0 / (rank + 1)  # type: ignore[assignment]  # typeshed: int counts only
    return [name for name, _ in found.most_common(limit)]


def adds_needed(question: str, missing: list[str], before: Sequence[Passage], after: Sequence[Passage]) -> bool:
    """Whether a passage that `after` shows and `before` did not holds a key term of the question, or
    of what a grade found missing, that no passage of `before` holds. If none does, the new passages
    add nothing a grade of `before` lacked, and grading again would say the same."""
    held = set(tokenize("\n".join(evidence_texts(before))))
    wanted = {t for text in [question, *missing] for t in key_terms(text)} - held
    shown = {item["id"] for item in before}
    return any(wanted & set(tokenize(text)) for text in evidence_texts([e for e in after if e["id"] not in shown]))


def is_bridge_question(question: str) -> bool:
    """A question answered along hops: nested (a bridge fact first), and no comparison, whose items
    are parts of their own."""
    return is_nested(question) and not is_comparison(question)


def hop_levels(question: str, evidence: Sequence[Passage]) -> dict[int, int]:
    """How many hops each evidence item (by its index) lies from what the question names: 0 for a
    passage holding every word of a name the question asks about (and for a tool's result), k + 1 for
    one whose title a passage of hop k names; a passage titled as one of a nearer hop is about the
    same thing and shares its hop. Items no hop reaches are left out. A question without names puts
    everything at 0; names with Chinese characters do not count, since without capitals their edges
    are guesses."""
    named = [n for n in (set(tokenize(n)) for n in asked_entities(question) if not has_cjk(n)) if n]
    if not named:
        return dict.fromkeys(range(len(evidence)), 0)
    tokens = [set(tokenize(text)) for text in evidence_texts(evidence)]
    titles = [set(tokenize(item.get("title") or "")) for item in evidence]
    level = {i: 0 for i, held in enumerate(tokens) if any(n <= held for n in named)
             or evidence[i].get("kind", "passage") != "passage"}
    depth = 0
    while hop := {i for i in range(len(evidence)) if i not in level and titles[i]
                  and any(titles[i] <= tokens[j] for j, d in level.items() if d == depth)}:
        depth += 1
        level.update(dict.fromkeys(hop, depth))
    nearest: dict[str, int] = {}
    for i, d in level.items():
        title = evidence[i].get("title") or f"#{i}"
        nearest[title] = min(d, nearest.get(title, d))
    merged = {i: nearest[evidence[i].get("title") or f"#{i}"] for i in sorted(level)}
    rank = {d: r for r, d in enumerate(sorted(set(merged.values())))}  # hops left empty by the merge close up
    return {i: rank[d] for i, d in merged.items()}


def cited_numbers(answer: str, evidence: Sequence) -> list[int]:
    """The evidence numbers the answer's [n] markers cite that point at evidence, in order."""
    return list(dict.fromkeys(int(n) for n in re.findall(r"\[(\d+)\]", answer) if 0 < int(n) <= len(evidence)))


def missing_parts(answer: str, evidence: Sequence[Passage], parts: Sequence[str], question: str = "") -> list[str]:
    """Parts of the question the answer leaves out (a cited passage's title counts as said), then,
    given the question, the hops it leaves uncited (missing_hops)."""
    said = " ".join(evidence[n - 1].get("title", "") for n in cited_numbers(answer, evidence))
    missing = [p for p in parts if coverage(key_terms(p), f"{answer} {said}") < 0.5]
    return missing + (missing_hops(question, answer, evidence) if question else [])


def missing_hops(question: str, answer: str, evidence: Sequence[Passage]) -> list[str]:
    """For a nested question whose evidence holds a bridge (a passage a hop past the question's
    names, hop_levels): the hops without a cited passage, up to the farthest the answer cites and at
    least one past the question's names, each named by its best passage's title. A comparison's
    items are parts, not hops; evidence without a bridge shows no hop to ask for."""
    if not is_bridge_question(question):
        return []
    levels = hop_levels(question, evidence)
    if not max(levels.values(), default=0):
        return []
    reached = {levels[n - 1] for n in cited_numbers(answer, evidence) if n - 1 in levels}
    firsts = {d: i for i, d in sorted(levels.items(), reverse=True)}  # each hop's best (first) passage
    return [f"hop {hop + 1}: {evidence[firsts[hop]].get('title') or evidence[firsts[hop]]['text'][:60]}"
            for hop in range(max(reached | {1}) + 1) if hop not in reached]


# What a question names that a knowledge base must hold to answer it (named_terms): code-like words,
# quotations, Latin-script words in Chinese, and a Chinese question's subject (what comes before its first 的)
_CODE_WORD = re.compile(r"(?<![\w.-])(?:--?[A-Za-z][A-Za-z0-9-]*|[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+"  # --opt, a_b
                        r"|[A-Za-z][A-Za-z0-9-]*(?:\.[A-Za-z0-9][A-Za-z0-9-]*)+|[a-z]+[A-Z][A-Za-z0-9]*"  # a.b, macOS
                        r"|v?\d+(?:\.\d+)+)(?![A-Za-z0-9_-])")  # 1.2
_LATIN_WORD = re.compile(r"(?<![A-Za-z0-9_.+-])[A-Za-z][A-Za-z0-9_.+-]*[A-Za-z0-9]")
_CJK_SUBJECT = re.compile(rf"^\s*(?:请问|我想知道|想问一下)?\s*([{CJK}A-Za-z0-9]{{2,14}}?)的")
# a clause these open is a condition, a means or a circumstance, not the question's subject
_CJK_ADVERBIAL = re.compile(r"^(?:如果|假如|要是|若|当|在|用|使用|通过|对于|关于|为了|除了|把|给|让|从|向|跟|和|与)")
# before a name in its clause, these make it an example or a contrast, not what the question asks about
_ASIDE = re.compile(r"\b(?:like|such as|e\.g\.|for (?:example|instance)|unlike|instead of|rather than|other than|"
                    r"besides|apart from|except|including)\s|例如|比如|诸如|像|除了|而不是", re.I)


def named_terms(question: str) -> list[tuple[str, bool]]:
    """What the question names, each with whether it is an aside (an example or a contrast: inside
    parentheses, or after "like", "such as", "instead of", 例如 ... in its clause) rather than what it
    asks about: quotations and titles, capitalised names past a sentence's first word, code-like words
    (snake_case, dotted names, --options, mixedCase, versions); in a question with Chinese, its
    Latin-script words and its subject (the words before its first 的)."""
    found: dict[str, bool] = {}

    def add(term: str, at: int) -> None:
        term = term.strip(" .,;:!?'’\"“”「」《》`()")
        if len(term) < 2 or not tokenize(term) or term.casefold() in _NOT_A_NAME:
            return
        clause = re.split(r"[,;:，；：()（）]", question[:at])[-1]
        aside = bool(_ASIDE.search(clause)) or question[:at].count("(") + question[:at].count("（") > \
            question[:at].count(")") + question[:at].count("）")
        found[term] = found.get(term, True) and aside

    cjk = has_cjk(question)
    for match, words in mentions(question, _NOT_A_NAME, possessive=True):
        first = question[:match.start()].rstrip()[-1:] in ("", ".", "!", "?", "。", "？", "！", "\n")
        if cjk and match.group(0)[:1] not in "《“\"「":
            continue  # in Chinese, only quotations: the name finder's other Chinese forms are guesses
        if first and match.group(0)[:1].isalpha() and len(words) == len(match.group(0).split()):
            words = words[1:]  # a sentence's first word is capitalised whatever it is
        if words:
            add(" ".join(words), match.start() + match.group(0).find(words[0]))
    for pattern in (_CODE_WORD, _LATIN_WORD) if cjk else (_CODE_WORD,):
        for match in pattern.finditer(question):
            if not re.fullmatch(r"(?:\w\.)+\w?", match.group(0)):  # e.g, i.e, U.S: abbreviations, not names
                add(match.group(0), match.start())
    subject = _CJK_SUBJECT.match(question) if cjk else None
    if subject and has_cjk(subject.group(1)) and not _CJK_ADVERBIAL.match(subject.group(1)) \
            and not re.search(f"{_CJK_QUESTION.pattern}|是|[我你他她它咱]", subject.group(1)):
        add(subject.group(1), subject.start(1))
    return list(found.items())


def aside_terms(question: str) -> set[str]:
    """The key terms of the names the question gives only as an aside (named_terms), with the words
    that make them one ("unlike", "such as"): what it does not ask about."""
    terms = {t for name, aside in named_terms(question) if aside for t in key_terms(name)}
    return terms | {t for m in _ASIDE.finditer(question) for t in key_terms(m.group(0))} if terms else terms


def asked_entities(question: str) -> list[str]:
    """entities() without the names the question gives only as an aside."""
    aside = aside_terms(question)
    return [n for n in entities(question) if not aside or not set(key_terms(n)) <= aside]
