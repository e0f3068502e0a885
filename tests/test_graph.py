from agentic_rag import Config, KnowledgeBase
from agentic_rag.kb import Document
from agentic_rag.kb.indexes._graph import KnowledgeGraph
from agentic_rag.text._names import names

CORPUS = [
    Document("acme", "Acme Corporation was founded by Wile Coyote in Phoenix. It makes rocket skates.", title="Acme"),
    Document("coyote", "Wile Coyote studied at Desert University. He later moved to Tucson.", title="Wile Coyote"),
    Document("weather", "Rain fell in Springfield.", title="Weather report"),
]


def _built(documents) -> KnowledgeBase:
    kb = KnowledgeBase()
    kb.add_documents(documents)
    return kb


def _paths(kb: KnowledgeBase, name: str) -> list[list[str]]:
    return [h.path for h in kb.graph_search(name, hops=1)]


def test_names_skip_sentence_openers_and_keep_titles_codes_and_organisations():
    assert names("The Society for the Exploration of Psychotherapy Integration publishes it.") == [
        "Society for the Exploration of Psychotherapy Integration"]
    assert names("Released today. Version 2.3.1 fixed NT-1042 for Bank of America.") == ["2.3.1", "NT-1042",
                                                                                          "Bank of America"]
    assert names("乙方：深圳星河包装材料有限公司。《七人乐队》上映。") == ["深圳星河包装材料有限公司", "《七人乐队》"]


def test_a_chinese_character_ends_a_latin_name_or_code():
    assert names("C919的全称是什么？") == ["C919"]
    assert names("Nimbus Notes的 El Torito规格") == ["Nimbus Notes", "El Torito"]


def test_a_rare_chinese_character_is_chinese_too():
    # extension A (㑩) and compatibility ideographs are in the one CJK class (kb.tokenize.CJK)
    assert names("侏㑩纪公司成立于1990年。") == ["侏㑩纪公司"]
    assert names("Welcome to Mars\ufa0e号") == ["Mars"]


def test_extraction_links_names_in_one_sentence_and_the_title():
    graph = KnowledgeGraph()
    graph.add(0, "Acme", CORPUS[0].text)
    assert set(graph.adjacent["acme corporation"]) == {"wile coyote", "phoenix", "acme"}
    assert graph.edges[("acme corporation", "wile coyote")] == {0}
    assert "rocket" not in graph.adjacent     # common words are not names


def test_walk_one_and_two_hops_with_paths():
    kb = KnowledgeBase(config=Config(chunk_size=300, chunk_overlap=0))
    kb.add_documents(CORPUS)
    one = kb.graph_search("Who founded Acme Corporation?", hops=1)
    assert [h.doc_id for h in one] == ["acme"]
    assert one[0].path[0] == "Acme Corporation" and len(one[0].path) == 2
    two = kb.graph_search("Where did the founder of Acme Corporation study?", hops=2)
    assert [h.doc_id for h in two] == ["acme", "coyote"]
    assert two[1].path[0] == "Acme Corporation" and two[1].path[-1] in ("Desert University", "Tucson", "Wile Coyote")
    assert two[1].ranks == {"graph": 2}
    assert kb.graph_search("Rain in Springfield") and kb.graph_search("nothing named here") == []


def test_graph_is_saved_with_the_generation_and_kept_in_step(tmp_path):
    kb = KnowledgeBase()
    kb.add_documents(CORPUS)
    size = kb.graph_size
    kb.save(tmp_path / "kb")
    loaded = KnowledgeBase.load(tmp_path / "kb")
    assert loaded.graph_size == size
    assert [h.id for h in loaded.graph_search("Wile Coyote")] == [h.id for h in kb.graph_search("Wile Coyote")]
    loaded.delete_documents(["coyote"])
    assert loaded.graph_size == _built([CORPUS[0], CORPUS[2]]).graph_size   # its names and edges went with it
    assert loaded.graph_search("Desert University") == []
    assert {h.doc_id for h in loaded.graph_search("Wile Coyote")} == {"acme"}
    moved = Document("acme", "Acme Corporation moved to Tucson.", title="Acme")
    loaded.add_documents([moved])                                              # replaced
    assert loaded.graph_search("Wile Coyote") == []                            # the old sentence's edges went
    assert [(h.doc_id, h.path) for h in loaded.graph_search("Tucson", hops=1)] == [("acme", ["Tucson", "Acme"])]
    assert loaded.graph_size == _built([moved, CORPUS[2]]).graph_size
    loaded.save(tmp_path / "kb")
    assert KnowledgeBase.load(tmp_path / "kb").graph_size == loaded.graph_size


def test_a_language_model_graph_from_triples(tmp_path):
    import pytest

    from agentic_rag import ConfigurationError, ScriptedModel
    from agentic_rag.steps import triple_extractor

    model = ScriptedModel({"extract": [
        {"triples": [{"subject": "Wile Coyote", "relation": "founded", "object": "Acme Corporation"},
                     {"subject": "Acme Corporation", "relation": "is based in", "object": "Phoenix"}]},
        "not json", "still not json",                       # the second chunk: invalid twice -> no triples
        {"triples": []}]})
    kb = KnowledgeBase(extract_triples=triple_extractor(model), graph_method="model:scripted")
    kb.add_documents(CORPUS)
    assert _paths(kb, "Wile Coyote") == [["Wile Coyote", "(founded) Acme Corporation"]]   # the relation is kept
    hits = kb.graph_search("Who founded Acme Corporation?", hops=1)
    assert hits[0].doc_id == "acme" and hits[0].path[1] in ("(founded) Wile Coyote", "(is based in) Phoenix")
    assert model.tasks() == ["extract"] * 3 and "Passage: " in model.calls[0].messages[1]["content"]
    kb.save(tmp_path / "kb")
    loaded = KnowledgeBase.load(tmp_path / "kb")
    assert loaded.graph_method == "model:scripted" and loaded.graph_size == kb.graph_size == (3, 2)
    for name in ("Wile Coyote", "Phoenix", "Acme Corporation"):
        assert _paths(loaded, name) == _paths(kb, name)
    with pytest.raises(ConfigurationError, match="graph was built by model:scripted"):
        loaded.add_documents([Document("x", "More text about Acme Corporation.")])


def test_offline_model_extracts_names_that_share_a_sentence():
    from agentic_rag import OfflineModel
    from agentic_rag.steps import triple_extractor

    triples = triple_extractor(OfflineModel())("Acme", "Acme Corporation hired Wile Coyote in Phoenix.")
    assert ("Acme Corporation", "appears with", "Wile Coyote") in triples and len(triples) == 3


def test_the_walk_takes_each_node_s_40_strongest_edges_rows_ascending():
    from agentic_rag.kb.indexes._graph import NEIGHBOURS, walk

    # the hub has 45 neighbours: n00..n44, the edge to n{i} backed by rows {100 + i} (and 200 + i for i >= 40)
    edges = {"hub": [(f"n{i:02d}", {100 + i, 200 + i} if i >= 40 else {100 + i}) for i in range(45)]}
    edges["n44"] = [("hub", edges["hub"][44][1]), ("far", {7, 3})]
    asked = []

    def neighbours(nodes):
        asked.append(list(nodes))
        return {node: edges.get(node, []) for node in nodes}

    found = walk(neighbours, lambda pairs: [other.upper() for _, other in pairs], {"hub": "Hub"}, hops=2)
    assert NEIGHBOURS == 40 and asked[0] == ["hub"] and len(asked[1]) == 40
    one = [row for row, (hop, _) in found.items() if hop == 1]
    # the five edges of two rows first, then by key: n00..n34; each edge's rows ascending
    assert one == [140, 240, 141, 241, 142, 242, 143, 243, 144, 244] + [100 + i for i in range(35)]
    assert found[3] == (2, ["Hub", "N44", "FAR"]) and found[7] == (2, ["Hub", "N44", "FAR"])
    assert list(found)[-2:] == [3, 7]
    assert walk(neighbours, lambda pairs: [], {}, hops=2) == {}


def test_graph_search_ranks_by_hop_then_bm25_then_row():
    kb = KnowledgeBase(config=Config(chunk_size=300, chunk_overlap=0))
    kb.add_documents([Document("plain", "Anna Berg met Carl Moe.", title=""),
                      Document("rich", "Anna Berg met Carl Moe. Anna Berg was a painter, Anna Berg said.", title=""),
                      Document("far", "Carl Moe lived in Bergen.", title="")])
    hits = kb.graph_search("Anna Berg painter", k=5, hops=2)
    # both first-hop rows hold the query's terms; the one BM25 scores higher leads, though its row is later
    assert [h.doc_id for h in hits] == ["rich", "plain", "far"]
    assert [h.score for h in hits] == [1.0, 1.0, 0.5] and hits[2].path == ["Anna Berg", "Carl Moe", "Bergen"]


def test_node_key_is_the_one_name_form_both_backends_key_nodes_by():
    from agentic_rag.kb.indexes._graph import node_key

    assert node_key("  Wile\tCOYOTE \n") == node_key("wile coyote") == "wile coyote"
    kb = _built(CORPUS)
    assert _paths(kb, "Where did wile   COYOTE study?") == _paths(kb, "Where did Wile Coyote study?") != []


def test_pagerank_walks_from_the_seed_names_through_shared_names_and_not_through_hubs():
    from agentic_rag.kb.indexes._graph import HUB_ROWS, pagerank

    rows = {"a": {1, 2}, "b": {2, 3}, "c": {3, 4}, "hub": set(range(100, 100 + HUB_ROWS + 1)) | {1}}
    held = {row: {n for n, found in rows.items() if row in found} for row in set().union(*rows.values())}
    asked = []

    def rows_of(names):
        asked.append(sorted(names))
        return {n: rows[n] for n in names if n in rows}

    def nodes_of(found):
        return {row: held[row] for row in found}

    assert [row for row, _ in pagerank(rows_of, nodes_of, {"a": 1.0}, {}, hops=0)] == [1, 2]
    one = pagerank(rows_of, nodes_of, {"a": 1.0}, {}, hops=1)
    # 2 names b as well, which 3 shares: mass comes back to it; the hub's passages are never reached
    assert [row for row, _ in one] == [2, 1, 3]
    asked.clear()
    two = pagerank(rows_of, nodes_of, {"a": 1.0}, {}, hops=2)
    assert sum("hub" in names for names in asked) == 1     # asked for once, then left out
    assert [row for row, _ in two] == [2, 1, 3, 4] and all(s > 0 for _, s in two)
    assert two == pagerank(rows_of, nodes_of, {"a": 1.0}, {}, hops=2)     # the same every time
    # a passage seed alone: its neighbours through b and c follow it, the nearer first
    assert [row for row, _ in pagerank(rows_of, nodes_of, {}, {3: 1.0}, hops=1)][:1] == [3]
    assert pagerank(rows_of, nodes_of, {"nowhere": 1.0}, {}, hops=2) == []


def test_a_walk_is_seeded_by_the_names_the_question_writes_and_those_of_the_passage_answering_it():
    from agentic_rag.kb.indexes._graph import seed_names

    question = "Where was the director of Quiet Harbor born, in which country?"
    starts = {"quiet harbor": "Quiet Harbor", "country": "Country"}   # "Country" as a sentence somewhere opened
    passages = [("The film Quiet Harbor was directed by Anna Berg. It won a prize in Oslo.", 2.0),
                ("Carl Moe wrote about Quiet Harbor, the director and where the director was born.", 1.0)]
    assert seed_names(question, starts, passages) == {"quiet harbor": 1.0, "anna berg": 1.0, "carl moe": 0.5}
