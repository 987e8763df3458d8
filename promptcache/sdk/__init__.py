"""SDK wrapper around the official anthropic and openai clients (see wrap())."""
