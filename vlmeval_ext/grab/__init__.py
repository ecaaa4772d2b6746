"""GRAB (Roberts et al. 2024): graph-analysis questions with official, normalized and LLM-extracted scoring."""
