"""Real Triton modules whose text the builtin writer copies into the files it emits."""
