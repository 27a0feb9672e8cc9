"""The learned line retriever: its training data (pages and traces), its training and
its evaluation."""
