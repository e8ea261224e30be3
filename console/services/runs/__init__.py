"""Runs as people read them: filtered lists, one run's story, the Gantt."""
