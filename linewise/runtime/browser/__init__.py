"""linewise/runtime/browser"""
