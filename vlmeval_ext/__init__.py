"""vlmeval-ext: extra VLMEvalKit benchmarks (R-Bench-Full, GRAB, ReMI, RoCOCO, corruption robustness).

`import vlmeval_ext` does nothing to the kit and does not import it. To make the kit know our datasets and
models, call `vlmeval_ext.register()` once before the kit builds them (our `run.py` / `vlmeval-ext run` do):

    import vlmeval_ext
    vlmeval_ext.register()
"""
__version__ = '0.1.0'

from vlmeval_ext.errors import ExtError
from vlmeval_ext.registry import register

__all__ = ['ExtError', 'register', '__version__']
