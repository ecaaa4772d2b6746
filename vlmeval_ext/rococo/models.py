"""RoCOCO embedding models as kit models: each "prediction" is the L2-normalised embedding of the row's image or
caption, encoded by data.encode_vector ('emb:f32:<dim>:<base64>'); RoCOCORetrieval.evaluate ranks them.

Registered names (vlmeval_ext.registry.MODEL_FACTORIES): RoCOCO-CLIP-B32, RoCOCO-CLIP-L14, RoCOCO-OpenCLIP-B32,
RoCOCO-BLIP-ITC. Any checkpoint through a --config JSON:
  {"model": {"my-clip": {"class": "RoCOCOEmbeddingModel", "backend": "hf-clip", "model_path": "/ckpt/dir"}},
   "data": {"RoCOCO-I2T-danger": {"class": "RoCOCORetrieval", "dataset": "RoCOCO-I2T-danger"}}}
backend: hf-clip (transformers CLIPModel), hf-blip (BlipForImageTextRetrieval, ITC heads), open_clip (arch/tag).
"""
from __future__ import annotations

from vlmeval.vlm.base import BaseModel

from vlmeval_ext.rococo import data as D
from vlmeval_ext.rococo import embed as E


class RoCOCOEmbeddingModel(BaseModel):
    INTERLEAVE = True
    is_api = False
    allowed_types = ['text', 'image']

    def __init__(self, model_path: str | None = None, backend: str = 'hf-clip', name: str | None = None,
                 device: str | None = None, precision: str = 'f32', **kwargs):
        super().__init__()
        if not model_path:
            raise ValueError('RoCOCOEmbeddingModel needs model_path (a hub name or a local checkpoint folder)')
        if precision not in ('f32', 'f16'):
            raise ValueError(f'precision must be f32 or f16, got {precision!r}')
        if kwargs:
            raise ValueError(f'RoCOCOEmbeddingModel: unknown argument(s) {sorted(kwargs)}')
        if device is None:
            import torch
            device = 'cuda' if torch.cuda.is_available() else 'cpu'
        self.embedder = E.load_embedder(f'{backend}:{model_path}', device=device)
        self.name = name or self.embedder.name
        self.precision = precision

    # The kit's BaseModel.generate treats any text that names an existing file as a file; captions are text.
    def generate(self, message, dataset=None):
        if isinstance(message, str):
            message = [{'type': 'text', 'value': message}]
        if not isinstance(message, list) or not all(isinstance(m, dict) and 'type' in m and 'value' in m
                                                     for m in message):
            raise ValueError(f'{self.name}: expected a list of {{"type", "value"}} messages, got {message!r:.200}')
        return self.generate_inner(message, dataset)

    def generate_inner(self, message, dataset=None):
        images = [m['value'] for m in message if m['type'] == 'image']
        texts = [m['value'] for m in message if m['type'] == 'text']
        if len(images) == 1 and not texts:
            from PIL import Image
            with Image.open(images[0]) as im:
                vec = self.embedder.embed_images([im.convert('RGB')])[0]
        elif len(texts) == 1 and not images:
            vec = self.embedder.embed_texts([texts[0]])[0]
        else:
            raise ValueError(f'{self.name} embeds one image or one caption per row (RoCOCO-I2T/T2I datasets); got '
                             f'{len(images)} image(s) and {len(texts)} text(s) from {dataset}. Generative models '
                             'take RoCOCO-MCQ-<attack>')
        return D.encode_vector(vec, self.precision)
