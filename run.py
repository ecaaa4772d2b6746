"""VLMEvalKit's run.py with vlmeval-ext's datasets registered: every kit flag works as in the kit.

    python run.py --data R-Bench-Full --model InternVL2-1B
    torchrun --nproc-per-node=2 run.py --data GRAB --model InternVL2-1B
"""
from vlmeval_ext.launcher import main

if __name__ == '__main__':
    main()
