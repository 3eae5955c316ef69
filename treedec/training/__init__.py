"""Training: packing decoding graphs into one sequence, the training loop, checkpoints."""
