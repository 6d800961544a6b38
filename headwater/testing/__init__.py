"""Headwater's kit for plugin authors: pytest fixtures and the connector conformance suite."""
