"""The plugin host: discovery (a cached entry-point index, names filtered before import), typed calls, deadlines, quarantine."""
