"""R-Bench-Full: MCQ/VQA/CAP on reference and distorted images with the paper's judge protocol (no kit imports)."""
