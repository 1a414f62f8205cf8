"""A heartbeat's record, read by this release whether an older node wrote it (no catalog
fingerprint) or this one did."""

from __future__ import annotations

import json

from metastore.cluster.membership import Heartbeat, _decode


def test_a_heartbeat_carries_its_fingerprint_and_an_older_one_reads_without() -> None:
    older = {"nodeId": "node-1", "url": "http://a:8088", "state": "READY", "appliedOffset": 7,
             "timestampMs": 1000, "queries": {}, "stores": {}, "pushQueries": {}}
    assert _decode(json.dumps(older).encode()) == Heartbeat("node-1", "http://a:8088", "READY",
                                                            7, 1000)
    newer = _decode(json.dumps({**older, "imageFingerprint": "ab12"}).encode())
    assert newer is not None and newer.image_fingerprint == "ab12"
    assert _decode(b"{not json") is None
