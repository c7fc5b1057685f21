"""Test doubles that are real programs: LLM API servers on 127.0.0.1, tiny local models."""
