"""``linewise improve``: run, prune, remember, run better — on a CPU, without training.

- ``loop``: the rounds (bench on training seeds with the memory so far, prune, add the
  successes to the memory, bench on the test seeds with it), reusing the bench driver,
  the pruner pipeline and the memory builder;
- ``report``: success per round (``improve.json``) and its Markdown table.
"""
