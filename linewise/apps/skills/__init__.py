"""``linewise skills``: skills induced from solved episodes (``runtime/replay/skill.py``)."""
