"""Code that every crossbench framework worker shares (no framework imports here)."""
