"""linewise"""
