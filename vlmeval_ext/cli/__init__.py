"""The command line: `vlmeval-ext` (main.py) and the commands it hands over to.

main.py            `vlmeval-ext`: run, eval, records, prepare, list, and the delegated commands
rbench.py          `python -m vlmeval_ext.cli.rbench`: R-Bench's tables from a scores file, without judging
rococo.py          `vlmeval-ext rococo` (`python -m vlmeval_ext.cli.rococo`): RoCOCO's prepare, embed, score, gallery
                   and mixed-image tools
export_upstream.py `vlmeval-ext export-upstream`: the lower layer as patches for a kit checkout
"""
