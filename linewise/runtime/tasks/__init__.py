"""linewise/runtime/tasks"""
