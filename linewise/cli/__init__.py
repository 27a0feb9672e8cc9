"""linewise/cli"""
