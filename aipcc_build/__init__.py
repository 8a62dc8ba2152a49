"""aipcc-build: images for several accelerator toolkit versions side by side."""

__version__ = "0.1.0"
