"""Quickstart: build a knowledge base from examples/data and ask it questions, offline.

    python examples/quickstart.py
"""
from pathlib import Path

from agentic_rag import (
    CALCULATOR,
    KnowledgeBase,
    OfflineModel,
    format_trace,
    load_documents,
    run_agentic_rag,
    shop_tools,
)

DATA = Path(__file__).parent / "data"

kb = KnowledgeBase()                                     # offline hashing embedder, no download
loaded = load_documents(DATA)
kb.add_documents(loaded.documents)
print(f"indexed {kb.document_count} documents as {len(kb)} chunks")

tools = [CALCULATOR] + shop_tools(DATA / "db" / "shop.sqlite")
model = OfflineModel()                                   # extractive: quotes the sources
for question in ["登录报错的问题在 2.3.1 版本里修复了吗？",      # version forms and synonyms
                 "合同A和合同B的违约责任有什么区别？",             # a comparison: decomposed
                 "订单 A1002 的状态是什么？",                      # a database lookup: the order tool
                 "Does Nimbus have an Android app?"]:              # not in the knowledge base: abstains
    state = run_agentic_rag(question, kb, model, tools)
    print(f"\nQ: {question}\nA: {state['answer']}")
    for citation in state["citations"]:
        print(f"   [{citation['n']}] {citation['source']}")
    print(f"   {format_trace(state)}")
    print(f"   stop: {state['stop_reason']}; model calls {state['usage']['model_calls']}; "
          f"tokens {state['usage']['prompt_tokens']} + {state['usage']['completion_tokens']}")
