"""Integrations with frameworks that read ezpz's decisions (DeepSpeed); each imports its framework lazily."""
