"""Built-in plugins, registered through the same entry points as external ones and answering last."""
