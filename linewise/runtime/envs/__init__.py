"""linewise/runtime/envs"""
