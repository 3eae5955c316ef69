"""Models: the adapter the engine calls, tiny Idefics3 configs, checkpoint loading."""
