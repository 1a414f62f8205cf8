"""Checkpoints: a node's replica state written at an offset, so a restart replays only the tail."""
