"""The cluster's members: each node's heartbeat on a compacted topic (``membership``) and the
broker's health as a node sees it (``health``)."""
