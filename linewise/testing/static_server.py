"""A localhost static file server for test pages (it lives in ``runtime``, where the
retriever's page snapshots use it too)."""

from linewise.runtime.static_server import StaticServer

__all__ = ["StaticServer"]
