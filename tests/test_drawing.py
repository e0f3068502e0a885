"""A run drawn as HTML (render_html, show): every part a person reads is there and linked, nothing is
fetched or run, and hostile text in documents, titles and questions shows as text."""
from html.parser import HTMLParser

from agentic_rag import (
    KnowledgeBase,
    OfflineModel,
    RunView,
    ScriptedModel,
    format_trace,
    render_html,
    run_agentic_rag,
    show,
)
from agentic_rag.kb import Document

HOSTILE = '<script>alert("x")</script><img src=x onerror="alert(1)"> & <b>bold</b>'


class Parsed(HTMLParser):
    """The tags, ids, links and text of a fragment, as a browser's parser reads them."""

    def __init__(self, html: str):
        super().__init__()
        self.tags, self.ids, self.links, self.attributes, self.text = [], set(), [], [], []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        values = dict(attrs)
        self.attributes += [name for name, _ in attrs]
        if "id" in values:
            self.ids.add(values["id"])
        if "href" in values:
            self.links.append(values["href"])

    def handle_data(self, data):
        self.text.append(data)


def test_a_run_is_drawn_with_its_answer_linked_to_the_passages_and_its_steps_timed(example_kb):
    state = run_agentic_rag("登录报错的问题在 2.3.1 版本里修复了吗？", example_kb, OfflineModel())
    html = render_html(state)
    page = Parsed(html)
    text = "".join(page.text)
    assert state["citations"] and all(f"[{c['n']}]" in state["answer"] for c in state["citations"])
    assert page.links and all(link[1:] in page.ids for link in page.links)  # every [n] opens its passage
    assert "<mark>" in html and "nimbus-2.3.1.md" in text                # the cited sentence, its file
    assert "Stopped sufficient: the evidence was graded sufficient to answer" in text
    assert text.count("route:vector") == 1 and all(event["summary"] in text for event in state["trace"])
    assert f"{state['usage']['model_calls']} model calls" in text and "Rounds" in text
    assert "script" not in page.tags and not any(a.startswith("on") for a in page.attributes)
    assert not any(link.startswith(("http:", "https:", "//")) for link in page.links) and "src" not in page.attributes
    assert show(state)._repr_html_() == html and repr(show(state)) == f"RunView(sufficient: {format_trace(state)})"
    assert isinstance(show(state), RunView)


def test_hostile_text_in_a_document_a_title_and_the_question_is_shown_as_text():
    kb = KnowledgeBase()
    kb.add_documents([Document("evil", f"The vault code is 7731. {HOSTILE}", title=HOSTILE, source=HOSTILE)])
    state = run_agentic_rag(f"What is the vault code? {HOSTILE}", kb, OfflineModel())
    page = Parsed(render_html(state))
    assert set(page.tags) <= {"div", "p", "b", "a", "code", "h4", "table", "tr", "th", "td", "ol", "li", "small",
                              "blockquote", "mark"}
    assert HOSTILE in "".join(page.text)  # the text as written, shown, not run
    assert not any(a.startswith("on") or a == "src" for a in page.attributes)


def test_a_refusal_and_a_failed_run_say_why_in_words(example_kb):
    refused = run_agentic_rag("What does the Globex warranty cover?", example_kb, OfflineModel())
    text = "".join(Parsed(render_html(refused)).text)
    assert refused["abstained"] and "Refused" in text and refused["stop_reason"] in text
    failed = run_agentic_rag("当天发货的截止时间？", example_kb, ScriptedModel(default={"grade": RuntimeError("down")}))
    text = "".join(Parsed(render_html(failed)).text)
    assert failed["stop_reason"] == "error" and "a model or tool failed past its retries" in text
    assert f"error: {failed['error']}" in text


def test_two_runs_in_one_notebook_keep_their_links_apart(example_kb):
    first, second = (render_html(run_agentic_rag(q, example_kb, OfflineModel())) for q in
                     ("登录报错的问题在 2.3.1 版本里修复了吗？", "仓库的截单时间是几点？"))
    assert Parsed(first).ids and not Parsed(first).ids & Parsed(second).ids
