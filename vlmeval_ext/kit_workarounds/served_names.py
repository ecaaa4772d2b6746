"""A model served under a name with a "/" ('Qwen/Qwen2-VL-7B-Instruct', as vLLM and LMDeploy name them).

The kit's run.py uses the name given to `--model` both as the folder of its results and as the name sent to the
server: with a "/" it makes a nested folder, and its API mode sends the safe form instead. Until the kit takes
upstream/0004-served-model-names-with-slash.patch, our run.py registers each `--base-url` model in the kit's
`supported_VLM` under its safe folder name ('Qwen--Qwen2-VL-7B-Instruct'), built with the kit's own
`build_model_from_base_url` arguments and the name as given, and hands the kit the folder names. The names as typed
are kept (`served`) for what people read.
"""
from __future__ import annotations

from functools import partial
from urllib.parse import urlsplit

GENERATION_ARGS = ('max_tokens', 'temperature', 'top_k', 'top_p', 'repetition_penalty', 'timeout', 'retry',
                   'custom_prompt', 'stream')


def serve_under_safe_names(base_kwargs: dict, names) -> dict[str, dict]:
    """Register each served model `name` in the kit's supported_VLM under its folder name (its safe form), as the
    kit's LMDeployAPI with `base_kwargs` (from the kit's build_model_from_base_url) and the name sent as given.
    Returns {folder: {served_name, folder_name, class, endpoint_host, endpoint, generation}}, in the order given."""
    import vlmeval.api as kit_api
    from vlmeval.config import supported_VLM

    from vlmeval_ext.io import safe_name
    served = {}
    for name in names:
        kwargs = {**base_kwargs, 'model': name}
        folder = safe_name(name)
        supported_VLM[folder] = partial(kit_api.LMDeployAPI, **kwargs)
        served[folder] = {'served_name': name, 'folder_name': folder, 'class': 'LMDeployAPI',
                          'endpoint_host': urlsplit(kwargs['api_base']).hostname,
                          'endpoint': kwargs['api_base'].split('?')[0],
                          'generation': {k: kwargs[k] for k in GENERATION_ARGS if k in kwargs}}
    return served
