"""Pickle the default synthetic pages' images (200, held-out seeds from 1,000,000) made by THIS
code, so that drafters of two versions read the same pixels (experiments/archive/draft_images.py)."""
import pickle, sys
import numpy as np
from treedec.data import SynthDataset
out = [(s.name, np.asarray(s.image)) for s in SynthDataset(pages=200, seed=1_000_000)]
pickle.dump(out, open(sys.argv[1], "wb"))
print(len(out), out[0][1].shape, out[0][1].dtype)
