"""The experience memory: worked examples from earlier successful episodes.

- ``store``: the entries (pydantic, JSONL on disk, versioned) and the task/seed key that
  keeps an episode from ever seeing its own task and seed;
- ``retrieve``: the k entries most like the current goal and page (BM25, plus the
  embedder where it is available), rendered as examples within a token budget;
- ``load``: the memory a run's settings name, read once per file version, and the leak
  check that refuses a memory built from the episodes a bench tests on.

Building a memory from traces is the runtime's job (``apps/memory``).
"""
