"""Asking a retriever model for lines, and what is kept whatever it says.

- :mod:`.ranges_answer`: the ranges answer's schema, prompt format and re-ask;
- :mod:`.defend`: defender mode (the retriever also names injected instructions);
- :mod:`.cost_gate`: whether asking the retriever costs less than the tokens it saves;
- :mod:`.escalation`: showing more when the agent is stuck on a view;
- :mod:`.recall_guard`: the elements every view keeps.

The ``lines`` filters (:mod:`..line_retriever`) and ``focus`` (:mod:`..focus`) ask
through these; the focus stages (:mod:`..stages`) sit above them.
"""
