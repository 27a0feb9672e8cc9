"""Applications built on the runtime: what people do with recorded and running episodes.

- ``bench``: task lists run concurrently (locally or on Ray), with an outage policy and
  a report;
- ``pruning``: the WebClipper pruner, turning traces into lean fine-tuning data;
- ``memory``: the experience memory built from pruned traces, retrieved at run time;
- ``improve``: the loop of bench, prune, remember, bench again;
- ``viewer``: the trace viewer (a static HTML build and a local server);
- ``filter_eval``: scoring observation filters on labelled cases;
- ``retriever``: the learned line retriever: its data, training, export and evaluation.

Nothing in ``linewise.runtime`` or ``linewise.agent`` imports from here (an import-linter
contract keeps it so): the runtime runs one episode, the applications use it.
"""
