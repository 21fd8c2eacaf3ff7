"""core: what every wing shares; the standard library only (and code/lessonkit.py, loaded by path)."""
