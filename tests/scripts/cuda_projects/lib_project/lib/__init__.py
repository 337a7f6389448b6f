"""The project's own library: model, data and distributed helpers, each written for NVIDIA GPUs."""
