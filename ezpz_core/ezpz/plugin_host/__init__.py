"""The plugin host: discovery (stevedore, entry points, names filtered before import), typed calls, deadlines, quarantine."""
