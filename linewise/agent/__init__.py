"""What the models see and say: actions, prompts, response parsing, the agent policy."""
