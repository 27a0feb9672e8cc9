"""Browser, observation, action execution, the episode loop, LLM clients and tracing."""
