"""The knowledge graph: names are nodes; two names in one sentence make an edge, and the edge
keeps that sentence's chunk as its evidence. A chunk's title is linked to every name in it.
Built offline at index time, saved in the same generation as the rest, updated with every add
and delete."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence

import numpy as np

from ...text import names, split_sentences, tokenize

MAX_NAMES = 12  # per sentence: a list of fifty names is a table, not a relation


# (title, text) -> [(subject, relation, object)]: a language model's reading of a chunk, for its graph
TripleExtractor = Callable[[str, str], list[tuple[str, str, str]]]
NEIGHBOURS = 40  # neighbours a walk follows from each node, strongest first: a hub's thousands are noise


def walk(neighbours: Callable[[list[str]], Mapping[str, Sequence[tuple[str, Collection[int]]]]],
         steps: Callable[[list[tuple[str, str]]], list[str]], starts: dict[str, str], hops: int = 2,
         limit: int = NEIGHBOURS) -> dict[int, tuple[int, list[str]]]:
    """A walk of `hops` from the start nodes (key -> name): row -> (hop, path of names) for every
    chunk row behind an edge it took. From each node it takes the `limit` strongest edges (most rows,
    then by key), each edge's rows ascending; a row keeps the first path that reached it.
    `neighbours(nodes)` gives {node: [(other, rows)]}; `steps([(node, other)])` the name each step
    adds to a path, in order. Every backend walks by it, each answering those two from its own store
    (PostgreSQL with a query each per hop)."""
    found: dict[int, tuple[int, list[str]]] = {}
    frontier = {key: [name] for key, name in starts.items()}
    seen = set(frontier)
    for hop in range(1, hops + 1):
        if not frontier:
            break
        near = neighbours(list(frontier))
        strongest = {node: sorted(near.get(node, ()), key=lambda edge: (-len(edge[1]), edge[0]))[:limit]
                     for node in frontier}
        names = iter(steps([(node, other) for node in frontier for other, _ in strongest[node]]))  # one call a hop
        nxt = {}
        for node, path in frontier.items():
            for other, rows in strongest[node]:
                step = next(names)
                for row in sorted(rows):
                    found.setdefault(row, (hop, path + [step]))
                if other not in seen:
                    seen.add(other)
                    nxt[other] = path + [step]
        frontier = nxt
    return found


DAMPING = 0.5         # of each step's mass, the share that walks on; the rest returns to the seeds (HippoRAG 2's)
ITERATIONS = 30       # power-iteration steps: at damping 0.5 what is still moving after 30 is below 1e-9
HUB_ROWS = 50         # a name in more passages than this is not walked through: it names no one thing
PASSAGE_SHARE = 0.05  # the seed passages' share of the seeds' mass beside the question's names (HippoRAG 2's)
RING_NAMES = 2_000    # names a ring of the walk expands at most (the first by key): a bound on a query's cost
WALK_ROWS = 5_000     # passages past which the walk takes no further ring


def seed_names(query: str, starts: dict[str, str], passages: list[tuple[str, float]]) -> dict[str, float]:
    """A PageRank walk's name seeds, node key -> weight: the nodes the query names (`starts`, key ->
    name as the graph first wrote it) where the query writes that name as written, each 1 (so
    "Country" opening a sentence somewhere is no seed for "which country"); and the names in the
    sentence of each seed passage (text, weight) that shares most of the query's words, weighted
    by that passage's share of the best one's: what the passage says of the question, which names
    the next hop (HippoRAG 2 seeds the names of the facts that match the question so)."""
    seeds = {key: 1.0 for key, label in starts.items() if label in query}
    asked = set(tokenize(query))
    best = max((weight for _, weight in passages), default=0.0)
    for text, weight in passages if best > 0 else ():
        sentence = max(split_sentences(text) or [text], key=lambda s: len(asked & set(tokenize(s))))
        for name in names(sentence)[:MAX_NAMES]:
            key = node_key(name)
            seeds[key] = max(seeds.get(key, 0.0), weight / best)
    return seeds


def pagerank(rows_of: Callable[[list[str]], Mapping[str, Collection[int]]],
             nodes_of: Callable[[list[int]], Mapping[int, Collection[str]]], names: dict[str, float],
             passages: dict[int, float], hops: int = 2) -> list[tuple[int, float]]:
    """Personalized PageRank over passages and the names they hold, in the style of HippoRAG: a
    passage is linked to each name in it, so mass flows from the seeds to the passages that share
    their names, and on. Seeds: names (key -> weight, seed_names), each weighted by its specificity
    too (one over the passages naming it), and seed passages (row -> weight, PASSAGE_SHARE of the whole when there
    are names too). The graph walked: the seed passages and those the seed names are in, then
    `hops` times the passages sharing a name with those reached, hub names left out (a ring
    expands at most RING_NAMES names, and none follows once WALK_ROWS passages are reached);
    returns each passage in it with its score, best first (ties by row).
    `rows_of(names)` gives {name: rows naming it}, `nodes_of(rows)` {row: names in it}: every
    backend answers those two from its own store, so both rank alike."""
    named: dict[str, set[int]] = {}  # the names walked through -> their passages
    skipped: set[str] = set()        # hubs, and names the graph does not hold
    rows, expand, unread = set(passages), sorted(names), sorted(passages)
    for step in range(hops + 1):
        found = rows_of(expand)
        for name in expand:
            if 0 < len(found.get(name, ())) <= HUB_ROWS:
                named[name] = set(found[name])
            else:
                skipped.add(name)
        reached = sorted({row for name in expand for row in named.get(name, ())} - rows)
        rows.update(reached)
        if step == hops or len(rows) >= WALK_ROWS:
            break
        unread = sorted(set(unread) | set(reached))
        held = nodes_of(unread)
        expand = sorted({n for row in unread for n in held.get(row, ())} - named.keys() - skipped)[:RING_NAMES]
        unread = []
    links = sorted((name, row) for name, found_rows in named.items() for row in found_rows & rows)
    keys: list = sorted(named) + sorted(rows)
    index = {key: i for i, key in enumerate(keys)}
    ends = np.array([(index[name], index[row]) for name, row in links], np.int64).reshape(-1, 2)
    edges_from, edges_to = np.concatenate([ends[:, 0], ends[:, 1]]), np.concatenate([ends[:, 1], ends[:, 0]])
    seeds = np.zeros(len(keys))
    for name, weight in names.items():
        if name in named:
            seeds[index[name]] = weight / len(named[name])
    names_mass = seeds.sum()
    if names_mass:
        seeds *= (1 - PASSAGE_SHARE if passages else 1.0) / names_mass
    total = sum(passages[row] for row in sorted(passages))  # one order in every backend
    for row, weight in passages.items() if total > 0 else ():
        seeds[index[row]] += (PASSAGE_SHARE if names_mass else 1.0) * weight / total
    if not seeds.any():
        return []
    seeds /= seeds.sum()
    degree = np.bincount(edges_from, minlength=len(keys)).astype(float)
    share = 1.0 / degree[edges_from]
    score = seeds.copy()
    for _ in range(ITERATIONS):
        moved = np.bincount(edges_to, weights=score[edges_from] * share, minlength=len(keys))
        stranded = score[degree == 0].sum()  # a passage with no link gives its mass back to the seeds
        score = (1 - DAMPING) * seeds + DAMPING * (moved + stranded * seeds)
    order = sorted(rows, key=lambda row: (-score[index[row]], row))
    return [(row, float(score[index[row]])) for row in order]


def node_key(name: str) -> str:
    """A name as the key of its graph node: case-folded, each run of whitespace one space."""
    return " ".join(name.casefold().split())


def _pair(a: str, b: str) -> tuple[str, str]:
    """An edge's key: its two node keys in order (an edge has no direction)."""
    return (a, b) if a <= b else (b, a)


class KnowledgeGraph:
    """Undirected edges between names, each with the chunk rows whose sentences join them."""

    def __init__(self) -> None:
        self.labels: dict[str, str] = {}                         # key -> name as first written
        self.edges: dict[tuple[str, str], set[int]] = {}         # (key, key) sorted -> rows
        self.adjacent: dict[str, set[str]] = defaultdict(set)
        self.relations: dict[tuple[str, str], set[str]] = {}    # from triples: the relation words
        self.row_nodes: dict[int, set[str]] = defaultdict(set)  # row -> the names its edges join

    def __len__(self) -> int:
        return len(self.edges)

    def add(self, row: int, title: str, text: str) -> None:
        """Link the names of each sentence of one chunk, and the title to every name."""
        head = [title] if title and len(title) <= 80 else []
        for sentence in split_sentences(text) or [text]:
            found = list(dict.fromkeys(head + names(sentence)[:MAX_NAMES]))
            for i, a in enumerate(found):
                for b in found[i + 1:]:
                    self._link(a, b, row)

    def add_triples(self, row: int, triples: list[tuple[str, str, str]]) -> None:
        """Subject-relation-object triples a language model read from one chunk."""
        for subject, relation, obj in triples:
            if subject.strip() and obj.strip() and self._link(subject.strip(), obj.strip(), row) and relation.strip():
                self.relations.setdefault(_pair(node_key(subject), node_key(obj)), set()).add(relation.strip())

    def _link(self, a: str, b: str, row: int) -> bool:
        ka, kb = node_key(a), node_key(b)
        if ka == kb:
            return False
        self.labels.setdefault(ka, a)
        self.labels.setdefault(kb, b)
        self.edges.setdefault(_pair(ka, kb), set()).add(row)
        self.row_nodes[row].update((ka, kb))
        self.adjacent[ka].add(kb)
        self.adjacent[kb].add(ka)
        return True

    def delete(self, rows: set[int]) -> None:
        """Forget deleted chunks; edges left without evidence go, and so do nodes left alone."""
        for edge in list(self.edges):
            self.edges[edge] -= rows
            if not self.edges[edge]:
                del self.edges[edge]
                self.relations.pop(edge, None)
                for a, b in (edge, edge[::-1]):
                    self.adjacent[a].discard(b)
        for row in rows:
            self.row_nodes.pop(row, None)
        for key in [k for k, v in self.adjacent.items() if not v]:
            del self.adjacent[key]
            self.labels.pop(key, None)

    def find(self, text: str) -> list[str]:
        """Nodes named in the text: its names, and node names it contains (long ones first)."""
        keys = [node_key(n) for n in names(text) if node_key(n) in self.adjacent]
        lowered = node_key(text)
        keys += sorted((k for k in self.adjacent if len(k) >= 4 and k in lowered), key=len, reverse=True)[:5]
        return list(dict.fromkeys(keys))

    def rows_of(self, nodes: list[str]) -> dict[str, set[int]]:
        """The rows each node's edges hold (a PageRank walk's `rows_of`)."""
        return {node: set().union(*(self.edges[_pair(node, other)] for other in self.adjacent[node]))
                for node in nodes if node in self.adjacent}

    def nodes_of(self, rows: list[int]) -> dict[int, set[str]]:
        """The nodes each row's edges join (a PageRank walk's `nodes_of`)."""
        return {row: self.row_nodes[row] for row in rows if row in self.row_nodes}

    def neighbours(self, nodes: list[str]) -> dict[str, list[tuple[str, set[int]]]]:
        """Each node's neighbours with the rows behind the edge to each (a walk's `neighbours`)."""
        return {node: [(other, self.edges[_pair(node, other)]) for other in self.adjacent[node]]
                for node in nodes}

    def steps(self, pairs: list[tuple[str, str]]) -> list[str]:
        """The name each (node, other) step adds to a path (a walk's `steps`)."""
        return [self._step(*pair) for pair in pairs]

    def _step(self, node: str, other: str) -> str:
        relation = self.relations.get(_pair(node, other))
        return f"({'/'.join(sorted(relation))}) {self.labels[other]}" if relation else self.labels[other]

    def to_json(self, rows: set[int] | None = None) -> dict:
        """Plain data for saving: the whole graph, or the edges that the given rows give evidence for."""
        edges = {e: found if rows is None else found & rows for e, found in self.edges.items()}
        edges = {e: found for e, found in edges.items() if found}
        keys = {k for edge in edges for k in edge}
        return {"labels": {k: v for k, v in self.labels.items() if k in keys},
                "edges": [[a, b, sorted(found)] for (a, b), found in edges.items()],
                "relations": [[a, b, sorted(r)] for (a, b), r in self.relations.items() if (a, b) in edges]}

    def add_json(self, data: dict) -> None:
        """Add a graph saved by to_json (names keep the label they were first written with)."""
        for key, label in data["labels"].items():
            self.labels.setdefault(key, label)
        for a, b, rows in data["edges"]:
            self.edges.setdefault((a, b), set()).update(rows)
            for row in rows:
                self.row_nodes[row].update((a, b))
            self.adjacent[a].add(b)
            self.adjacent[b].add(a)
        for a, b, relations in data.get("relations", []):
            self.relations.setdefault((a, b), set()).update(relations)

    @classmethod
    def from_json(cls, data: dict) -> KnowledgeGraph:
        """Rebuild a saved graph."""
        graph = cls()
        graph.add_json(data)
        return graph
