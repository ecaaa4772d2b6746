"""Test support that ships with the package: the loopback server and helpers to drive run.py against it."""
