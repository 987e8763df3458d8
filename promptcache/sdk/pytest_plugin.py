"""pytest plugin registered through the ``pytest11`` entry point.

Fixtures that give in-process local-backend clients are added with the SDK wrapper.
"""
