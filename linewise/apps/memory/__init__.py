"""Building an experience memory from traces (``build``); the entries, their retrieval
and loading are ``agent/experience``."""
