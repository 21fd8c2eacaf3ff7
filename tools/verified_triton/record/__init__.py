"""record: running lessons and carrying their evidence (what verify.py does); imports judge and core."""
