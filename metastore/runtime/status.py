"""Every query's state, owner node and lag, as any node sees it.

The owner of a query knows its state first hand; it publishes the states of the queries it
owns in its membership heartbeat (every 2 s). Any node, with or without Spark, merges the live
heartbeats: a query claimed by a live node has that node as owner; a query nobody claims is
PENDING (not started yet, or its owner died and the group has not moved its partition yet). A
query PAUSEd in the log is PAUSED whatever its owner last reported. The push queries a node
runs travel in its heartbeats too, so that every node lists them.
While a partition moves, two nodes can both report a query for one heartbeat; the one running
it wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from metastore.catalog.image import Image
from metastore.runtime.runner import PAUSED, PENDING, RUNNING, QueryState
from metastore.runtime.statistics import QueryFigures

Status = dict[str, Any]


def report(states: Mapping[str, QueryState]) -> dict[str, Any]:
    """What a node puts in its heartbeat: the queries it owns."""
    return {query_id: state.to_json() for query_id, state in sorted(states.items())}


class Claim(NamedTuple):
    """What a live node reports of the queries it runs."""

    node_id: str
    url: str
    """Where it serves (``http://host:port``); empty when unknown."""
    queries: Mapping[str, Any]


def merge(image: Image, claims: Iterable[Claim]) -> dict[str, Status]:
    """Each query of ``image``: ``{state, ownerNode, lag, message, skipped, skippedMs,
    recordErrors, statistics, offsets, errors}`` from the nodes' claims (``skipped``: records
    its owner skipped because it cannot read them, by source, ``skippedMs`` when it last did;
    ``recordErrors``: rows it could not
    process; ``statistics``: its owner's :class:`QueryFigures` as JSON; ``offsets``: where it
    is in each source, as :class:`QueryState` keeps them; ``errors``: ksqlDB's ``QueryError``s
    of its owner).

    ``claims`` are those of live nodes (this node's own first); ``ownerHost`` is the owner's
    ``host:port``, as ksqlDB names hosts.
    """
    best: dict[str, Status] = {}
    for node_id, url, claimed in claims:
        for query_id, state in claimed.items():
            if query_id not in image.queries or not isinstance(state, Mapping):
                continue
            skipped, offsets, errors = (state.get("skipped"), state.get("offsets"),
                                        state.get("errors"))
            candidate = {"state": str(state.get("state", PENDING)), "ownerNode": node_id,
                         "ownerHost": urlsplit(url).netloc or node_id,
                         "lag": state.get("lag"), "message": state.get("message"),
                         "skipped": dict(skipped) if isinstance(skipped, Mapping) else {},
                         "skippedMs": _times(state.get("skippedMs")),
                         "recordErrors": _count(state.get("recordErrors")),
                         "statistics": _figures(state.get("statistics")),
                         "offsets": dict(offsets) if isinstance(offsets, Mapping) else {},
                         "errors": [dict(e) for e in errors if isinstance(e, Mapping)]
                         if isinstance(errors, list) else []}
            current = best.get(query_id)
            if current is None or (current["state"] != RUNNING and candidate["state"] == RUNNING):
                best[query_id] = candidate
    merged: dict[str, Status] = {}
    for query_id, query in sorted(image.queries.items()):
        status = best.get(query_id) or {"state": PENDING, "ownerNode": None,
                                        "ownerHost": None, "lag": None,
                                        "message": None, "skipped": {}, "skippedMs": {},
                                        "recordErrors": 0,
                                        "statistics": _figures(None), "offsets": {},
                                        "errors": []}
        if query.paused:  # the log says so, whatever an owner last reported
            status = {**status, "state": PAUSED}
        merged[query_id] = status
    return merged


PUSH = "PUSH"


def push_queries(claims: Iterable[Claim]) -> dict[str, Status]:
    """Each push query a live node reports it runs (``claims`` of push query listings):
    ``{queryType: PUSH, queryString, state, ownerNode, ownerHost, ownerUrl}``, by id. A push
    query runs on the node its client asked, so one node claims it."""
    found: dict[str, Status] = {}
    for node_id, url, claimed in claims:
        for query_id, listed in claimed.items():
            if not isinstance(listed, Mapping) or query_id in found:
                continue
            found[query_id] = {"queryType": PUSH, "queryString": str(listed.get("queryString", "")),
                               "state": RUNNING, "ownerNode": node_id,
                               "ownerHost": urlsplit(url).netloc or node_id, "ownerUrl": url}
    return dict(sorted(found.items()))


def _times(reported: Any) -> dict[str, int]:
    """Epoch-ms times by name, as an owner reported them (anything else left out)."""
    if not isinstance(reported, Mapping):
        return {}
    return {str(name): at for name, at in reported.items() if type(at) is int and at >= 0}


def _count(reported: Any) -> int:
    return reported if type(reported) is int and reported >= 0 else 0


def _figures(reported: Any) -> dict[str, Any]:
    """A query's figures as its owner reported them, whatever a heartbeat carried."""
    return QueryFigures.from_json(reported).to_json()
