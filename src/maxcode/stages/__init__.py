"""Stage functions above the spine: what the pipeline's script rules and the CLI both call."""
