"""What the plugin runs with no network and no weights, each labelled as such wherever it is used.

judge.py   R-Bench's offline approximation of its GPT judge (MiniLM + rules)
models.py  the plugin's own kit models: Naive-Baseline (each benchmark's naive answer, the demo's floor) and
           RoCOCO-Smoke-Hash (a smoke test of the retrieval pipeline)
"""
