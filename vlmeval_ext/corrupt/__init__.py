"""Corruption engine: `vlmeval-ext corrupt` / `corrupt-image` and `<Dataset>-RC`, paired robustness for any kit image
dataset, with R-Bench's 33 distortions at 3 strengths (vlmeval_ext.distortions)."""
from vlmeval_ext.distortions import (DISTORTION_IDS, STRENGTHS, approximations, corrupt, corrupt_array,
                                     distortion_info)

__all__ = ['DISTORTION_IDS', 'STRENGTHS', 'approximations', 'corrupt', 'corrupt_array', 'distortion_info']
