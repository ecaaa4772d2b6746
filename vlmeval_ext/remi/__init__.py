"""ReMI (Kazemi et al. 2024): 13 multi-image reasoning tasks. Pure modules: data, prompt, score, report."""
