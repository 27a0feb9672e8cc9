"""The WebClipper pruner: recorded traces in, shorter coherent training trajectories out.

The pipeline (``pipeline.py``) follows the paper (shared/papers/webclipper.md, section 3
and Appendix B) adapted to browser episodes:

1. ``trajectory.py``  traces -> trajectories (goal, thought, action, observation seen)
2. ``extractor.py``   trajectory -> state graph, with an LLM (actions, then information);
   ``answers.py`` holds the answer schemas it asks for
3. ``miner.py``       state graph -> necessary actions (Algorithm 1; pure, no LLM)
4. ``vote.py``        several build+mine runs -> one agreed action set, or a discard
5. ``rewriter.py``    thoughts that lost their predecessor are rewritten, best by perplexity
6. ``export.py``      chat-messages JSONL with provenance, graphs (JSON + SVG), stats.json

``graph.py`` is the state-graph schema shared by the miner, the extractor, the exported
files and ``linewise mine``.
"""
