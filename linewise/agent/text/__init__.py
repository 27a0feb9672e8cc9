"""Text retrieval shared by the observation filters, the targets and the experience memory.

- :mod:`.bm25`: the words a line or query is indexed by and Okapi BM25 over lines
  (``LineRanker``);
- :mod:`.embedders`: texts to vectors (the offline MiniLM, an OpenAI-compatible endpoint);
- :mod:`.learned`: the embedder ``linewise retriever`` trains;
- :mod:`.chunking`: lines cut into token-sized chunks to embed.

Nothing here knows about filters: ``agent.filters`` imports it, never the reverse.
"""
