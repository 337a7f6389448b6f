"""A tiny character language model package written for one NVIDIA GPU."""
