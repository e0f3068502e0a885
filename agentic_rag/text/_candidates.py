"""Answer candidates: the pieces of a passage an answer may quote (sentences, table rows, list items,
code lines), told apart from the lines that only frame them (headings, table-of-contents lines,
questions), and the test for a piece that only restates the question. A heading or a line that says
back what was asked is context, never an answer."""
from __future__ import annotations

import re

from ._lexical import answer_type, has_answer_type
from ._sentences import LEVELS, cuts
from ._tokenize import CJK, STOPWORDS, normalize, stem

# a numbered heading ("1.1.6. Virtual consoles", "16.1 Authors", "A.2 ...", "第 3 章 ...") or a Markdown one
_NUMBERED = re.compile(r"^(?:(?:\d+|[A-Z])(?:\.\d+)*\.?|第\s*[\d一二三四五六七八九十百]+\s*[章节部分篇])\s+[^\W\d_]|"
                       r"^#{2,6}\s|^#\s+(?![a-z0-9_./-]+(?:\s|$))")
_LEADERS = re.compile(r"(?:\.\s?){4,}\s*\S*\s*$|…{2,}|·{4,}")  # table-of-contents dots before a page number
_TOC_ENTRY = re.compile(r"^(?:\d+|[A-Z])(?:\.\d+)+\.?\s+\S.*\s\d{1,4}$")  # "1.7 How does one pronounce Debian 3"
_COMMAND = re.compile(r"^[$#]\s+[a-z0-9_./-]+(?:\s|$)")  # a shell prompt's line: "$ ls", "# apt-get install x"
_LIST_ITEM = re.compile(r"^(?:[-*•]|\d+[.)、])\s+")
_END = re.compile(r"[.!?;。！？；:：][\"”’)）]*$")  # a sentence's end, closing quotes and brackets after it
_SHORT_HEADING = 60  # characters: a one-line paragraph without end punctuation, this short, titles what follows


def line_role(line: str, alone: bool = False) -> str:
    """What a line is: "toc", "heading" or "question" (frames the text: never an answer), "code",
    "row" (a table row), "item" (a list item) or "text". `alone`: the line is a paragraph by itself
    with text after it, so a short one without end punctuation is a title."""
    line = line.strip()
    if _LEADERS.search(line) or _TOC_ENTRY.match(line):
        return "toc"
    if _COMMAND.match(line):
        return "code"
    if " | " in line or line.startswith("| "):
        return "row"
    numbered = _NUMBERED.match(line)
    if numbered and len(line) <= 120 and not _END.search(line) and not re.search(r"[=\d]", line[numbered.end():]):
        return "heading"  # a numbered line that ends like a sentence is a list item; "15.0 USD = 108 CNY" a value
    if line.endswith(("?", "？")):
        return "question"
    if alone and len(line) <= _SHORT_HEADING and not _END.search(line) and not re.fullmatch(r"[\d\W]+", line):
        return "heading"
    return "item" if _LIST_ITEM.match(line) else "text"


def _titles_next(lines: list[str], i: int) -> bool:
    """Whether line i opens its paragraph or follows a finished sentence, and the next line opens a
    sentence of its own (a capital letter): a short line there without end punctuation is a heading
    written straight above its text ("Keyboard shortcuts" over "To search all notebooks, ...")."""
    opens = i == 0 or bool(_END.search(lines[i - 1]))
    last = re.findall(r"\w+|\W$", lines[i])[-1:]
    ends_open = not last or last[0].casefold() in STOPWORDS or last[0] in (",", "-", "，")  # "He moved to" / "Paris"
    return opens and not ends_open and i + 1 < len(lines) and lines[i + 1][:1].isupper()


def candidates(text: str) -> list[tuple[str, str]]:
    """The passage's pieces in order, each with its role (line_role): framing lines whole, a run of
    wrapped text lines joined and cut into sentences (no space where a line break fell between
    Chinese characters), rows, list items and code lines one each."""
    out: list[tuple[str, str]] = []
    paragraphs = list(cuts(text, LEVELS[0]))
    for at, paragraph in enumerate(paragraphs):
        lines = [line.strip() for line in paragraph.strip().split("\n") if line.strip()]
        titles = len(lines) == 1 and at < len(paragraphs) - 1  # a one-line paragraph with text after it
        run: list[str] = []
        for i, line in enumerate(lines + [""]):
            role = line_role(line, alone=titles or _titles_next(lines, i)) if line else "end"
            if role == "text" and run:
                run.append(line)
                continue
            if run:
                joined = re.sub(rf"(?<=[{CJK}，。、；：])\n(?=[{CJK}])", "", "\n".join(run)).replace("\n", " ")
                out += [(s.strip(), "text") for s in cuts(joined, LEVELS[2]) if s.strip()]
                run = []
            if role in ("text", "item"):
                run = [_LIST_ITEM.sub("", line)]
            elif role != "end":
                out.append((line, role))
    return out


FRAMING = frozenset({"toc", "heading", "question"})
_FUNCTION = frozenset("的了在是和与及或把被将从对为以其这那个些之于也都就而")
_QUESTION_WORDS = frozenset("what which who whom whose when where why how many much does did do can could "
                            "i my me we our you your tell please".split())


def _units(text: str) -> set[str]:
    """Content units: stemmed Latin words and numbers (no stopwords or question words), Chinese
    characters (no function characters)."""
    text = normalize(text)
    words = {stem(w) for w in re.findall(r"[^\W_]+", re.sub(f"[{CJK}]", " ", text))} - STOPWORDS - _QUESTION_WORDS
    return words | (set(re.findall(f"[{CJK}]", text)) - _FUNCTION)


def new_content(question: str, text: str) -> float:
    """How much the text says that the question does not: its new Latin words count one each, its new
    Chinese characters half each (a word is about two)."""
    new = _units(text) - _units(question)
    return sum(0.5 if re.match(f"[{CJK}]", u) else 1.0 for u in new)


def restates(question: str, text: str, title: str = "") -> bool:
    """Whether the text only says back what the question holds (a heading echoing it, "Recording the
    shell activities" for "How do I record my shell activities?"): a line without a sentence's end
    punctuation, with fewer than two new words, and no
    thing of the asked kind ("15 minutes" answers "How many minutes ...?"). The passage's `title`
    counts as said: "乙方：X公司" under the title "供货合同 B" answers "哪份合同的乙方是X公司？"."""
    if new_content(question, f"{title} {text}") >= 2 or _END.search(text.strip()):
        return False  # a sentence that ends as one states something: "通称弥七郎。" answers what it is called
    kind = answer_type(question)
    return kind == "other" or not has_answer_type(kind, text, question)


def answer_windows(question: str, text: str, title: str = "") -> list[str]:
    """Where a passage could answer the question: its title with each two neighbouring candidates,
    leaving out the lines that only frame the text and the pieces that only restate the question."""
    pieces = [p for p, role in candidates(text) if role not in FRAMING and not restates(question, p, title)]
    return [" ".join([title] + pieces[i:i + 2]) for i in range(max(0, len(pieces) - 1) or len(pieces))]
