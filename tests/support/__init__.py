"""Helpers shared by the tests (not pytest fixtures, which live in the conftest files)."""
