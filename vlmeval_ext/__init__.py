"""vlmeval-ext: extra VLMEvalKit benchmarks (R-Bench-Full, GRAB, ReMI, RoCOCO, corruption robustness).

`import vlmeval_ext` registers every dataset class and reference model of this package into the kit. It stays
cheap: if the kit's `vlmeval.dataset` / `vlmeval.config` are already imported they are patched now, otherwise
they are patched the moment the kit imports them (a post-import hook), so pure modules such as
`vlmeval_ext.grab.score` never pull in torch.
"""
__version__ = '0.1.0'

from vlmeval_ext.registry import install as _install

_install()
