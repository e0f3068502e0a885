"""Text to L2-normalised vectors: the hashing and e5 embedders and the Embedder protocol
(_embedders), and an OpenAI-compatible embeddings server (_openai)."""
