"""Process wiring: worker classes, the web server, `rebound up`'s supervisor, embedded Redis."""
