"""Process entry points: wiring, config, signals; no logic (STYLE.md)."""
