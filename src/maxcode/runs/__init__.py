"""Public runs of LLMs on KernelBench as one normalized corpus (see docs/corpus.md)."""
