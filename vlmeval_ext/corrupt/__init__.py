"""Corruption engine: R-Bench's 33 real-world distortions at 3 strengths for any image (numpy/Pillow/OpenCV)."""
from vlmeval_ext.corrupt.distortions import (DISTORTION_IDS, STRENGTHS, approximations, corrupt, corrupt_array,
                                             distortion_info)

__all__ = ['DISTORTION_IDS', 'STRENGTHS', 'approximations', 'corrupt', 'corrupt_array', 'distortion_info']
