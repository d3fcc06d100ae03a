"""What to train on: datasets, readers, mixtures, shuffling and the chunked work source (no payload I/O)."""
