"""The agent loop: run_agentic_rag's driver, the phase graph and its handlers, the run state and its
trace, conversation history and the Conversation helper."""
