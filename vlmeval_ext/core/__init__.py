"""Pieces written once and shared by every benchmark of vlmeval-ext (no kit imports here)."""
