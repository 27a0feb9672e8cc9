"""linewise/runtime/models"""
