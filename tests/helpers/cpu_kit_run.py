"""Run our run.py with the kit's own model classes on a machine without a GPU, recording what each model received.

    python cpu_kit_run.py RECORD.jsonl RUN.PY-ARGS...

With KIT_RUN_PY=<checkout>/run.py in the environment, that checkout's own run.py runs instead of ours (a
maintainer's check of an exported patch), and two lines say which `vlmeval` ran and which vlmeval_ext modules were
imported (none is expected).

The kit's local model classes are written for CUDA. Only that device plumbing is changed here, nothing of the
prompt, message or processing code:

- `vlmeval.smp.get_gpu_memory` (and the name `Qwen2VLChat`'s module imported) returns [1] instead of [] (the class
  asserts that a GPU has memory);
- `from_pretrained(..., attn_implementation='flash_attention_2')` of a `transformers` model loads with 'sdpa'
  (flash-attn is a CUDA library);
- `torch.nn.Module.cuda()` returns the module unchanged (PaliGemma moves its model with `.cuda()`);
- `BatchFeature.to('cuda')` moves to the CPU instead (the classes move the processor's output with `.to('cuda')`);
- `device_map='cuda'` becomes 'cpu'.

What the model received is read where the kit hands it over: each call of the processor (`Qwen2VLProcessor`,
`PaliGemmaProcessor`) appends one JSON line to RECORD.jsonl with the text it was given and the images (count and
size). The processor is called unchanged.
"""
import functools
import json
import os
import runpy
import sys


def _patch_device_plumbing():
    import torch
    import transformers
    from transformers.feature_extraction_utils import BatchFeature

    import vlmeval.smp
    import vlmeval.smp.misc

    def one_gpu():
        return [1]
    vlmeval.smp.get_gpu_memory = one_gpu
    vlmeval.smp.misc.get_gpu_memory = one_gpu
    import vlmeval.vlm.qwen2_vl.model as qwen2_vl_model
    qwen2_vl_model.get_gpu_memory = one_gpu

    torch.nn.Module.cuda = lambda self, *a, **k: self

    original_to = BatchFeature.to

    def to_cpu(self, *args, **kwargs):
        args = tuple('cpu' if a == 'cuda' else a for a in args)
        if kwargs.get('device') == 'cuda':
            kwargs['device'] = 'cpu'
        return original_to(self, *args, **kwargs)
    BatchFeature.to = to_cpu

    original_from_pretrained = transformers.PreTrainedModel.from_pretrained.__func__

    def from_pretrained(cls, *args, **kwargs):
        if kwargs.get('attn_implementation') == 'flash_attention_2':
            kwargs['attn_implementation'] = 'sdpa'
        if kwargs.get('device_map') == 'cuda':
            kwargs['device_map'] = 'cpu'
        return original_from_pretrained(cls, *args, **kwargs)
    transformers.PreTrainedModel.from_pretrained = classmethod(from_pretrained)


def _record_processor_inputs(record_path):
    from transformers import PaliGemmaProcessor, Qwen2VLProcessor

    def recording(cls):
        original = cls.__call__

        @functools.wraps(original)
        def call(self, *args, **kwargs):
            text = kwargs.get('text', args[1] if len(args) > 1 else (args[0] if args else None))
            images = kwargs.get('images', args[0] if args and not isinstance(args[0], (str, list)) else None)
            if images is not None and not isinstance(images, (list, tuple)):
                images = [images]
            images = [im for im in (images or []) if im is not None]
            if isinstance(text, (list, tuple)):
                text = text[0] if len(text) == 1 else list(text)
            with open(record_path, 'a', encoding='utf-8') as f:
                f.write(json.dumps({'processor': cls.__name__, 'text': text, 'n_images': len(images),
                                    'image_sizes': [list(getattr(im, 'size', ())) for im in images]}) + '\n')
            return original(self, *args, **kwargs)
        cls.__call__ = call

    recording(Qwen2VLProcessor)
    recording(PaliGemmaProcessor)


def main():
    record_path, argv = sys.argv[1], sys.argv[2:]
    _patch_device_plumbing()
    _record_processor_inputs(record_path)
    kit_run_py = os.environ.get('KIT_RUN_PY')
    if kit_run_py:
        sys.argv = [kit_run_py, *argv]
        try:
            runpy.run_path(kit_run_py, run_name='__main__')
        except SystemExit as stop:
            if stop.code not in (None, 0):
                raise
        import vlmeval
        print('EXPORT-CHECK vlmeval=' + vlmeval.__file__)
        print('EXPORT-CHECK plugin=' + ','.join(sorted(m for m in sys.modules if m.split('.')[0] == 'vlmeval_ext')))
        return
    from vlmeval_ext.launcher import main as launcher_main
    sys.argv = ['run.py', *argv]
    launcher_main()


if __name__ == '__main__':
    main()
