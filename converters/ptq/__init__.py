"""Post-training quantization algorithms the stages apply: precision rungs, range choice,
bias correction, AdaRound, the int8 global pool and the packed-output split."""
