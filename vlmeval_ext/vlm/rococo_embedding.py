"""Embedding models for RoCOCO retrieval (vlmeval/dataset/rococo_retrieval.py).

Each row of a RoCOCO-I2T / T2I dataset is one image or one caption; the model answers with its
L2-normalised embedding, "emb:f32:<dim>:<base64>", which the dataset's evaluate ranks. Backends:
    hf-clip    transformers CLIPModel (+ CLIPProcessor), e.g. openai/clip-vit-base-patch32
    hf-blip    transformers BlipForImageTextRetrieval, its ITC heads (first-stage scores: BLIP's
               published numbers re-rank the top 256 with the ITM head)
    open_clip  open_clip create_model_and_transforms, "<arch>/<pretrained tag>"
"""
import numpy as np

from vlmeval.vlm.base import BaseModel


def _unit(t):
    import torch
    return torch.nn.functional.normalize(t.float(), dim=-1).cpu().numpy().astype(np.float32)


class HFCLIPEmbedder:
    def __init__(self, path, device):
        import torch
        from transformers import CLIPModel, CLIPProcessor
        self.name, self.device, self.torch = f'hf-clip:{path}', device, torch
        self.model = CLIPModel.from_pretrained(path).to(device).eval()
        self.processor = CLIPProcessor.from_pretrained(path)
        self.max_length = self.model.config.text_config.max_position_embeddings

    def embed_images(self, images):
        with self.torch.no_grad():
            pix = self.processor(images=images, return_tensors='pt')['pixel_values']
            pooled = self.model.vision_model(pixel_values=pix.to(self.device)).pooler_output
            return _unit(self.model.visual_projection(pooled))

    def embed_texts(self, texts):
        with self.torch.no_grad():
            tok = self.processor(text=list(texts), return_tensors='pt', padding=True,
                                 truncation=True, max_length=self.max_length)
            pooled = self.model.text_model(
                input_ids=tok['input_ids'].to(self.device),
                attention_mask=tok['attention_mask'].to(self.device)).pooler_output
            return _unit(self.model.text_projection(pooled))


class HFBLIPEmbedder:
    def __init__(self, path, device):
        import torch
        from transformers import BlipForImageTextRetrieval, BlipProcessor
        self.name, self.device, self.torch = f'hf-blip:{path}', device, torch
        self.model = BlipForImageTextRetrieval.from_pretrained(path).to(device).eval()
        self.processor = BlipProcessor.from_pretrained(path)

    def embed_images(self, images):
        with self.torch.no_grad():
            pix = self.processor(images=images, return_tensors='pt')['pixel_values']
            hidden = self.model.vision_model(pixel_values=pix.to(self.device)).last_hidden_state
            cls = hidden[:, 0, :]
            return _unit(self.model.vision_proj(cls))

    def embed_texts(self, texts):
        with self.torch.no_grad():
            tok = self.processor(text=list(texts), return_tensors='pt', padding=True,
                                 truncation=True, max_length=35)
            out = self.model.text_encoder(input_ids=tok['input_ids'].to(self.device),
                                          attention_mask=tok['attention_mask'].to(self.device))
            return _unit(self.model.text_proj(out.last_hidden_state[:, 0, :]))


class OpenCLIPEmbedder:
    def __init__(self, spec, device):
        try:
            import open_clip
        except ImportError as err:
            raise ImportError('the open_clip backend needs `pip install open_clip_torch`') from err
        import torch
        arch, _, tag = spec.partition('/')
        self.name, self.device, self.torch = f'open_clip:{spec}', device, torch
        self.model, _, self.preprocess = open_clip.create_model_and_transforms(
            arch, pretrained=tag or None, device=device)
        self.model.eval()
        self.tokenizer = open_clip.get_tokenizer(arch)

    def embed_images(self, images):
        with self.torch.no_grad():
            pix = self.torch.stack([self.preprocess(im) for im in images]).to(self.device)
            return _unit(self.model.encode_image(pix))

    def embed_texts(self, texts):
        with self.torch.no_grad():
            return _unit(self.model.encode_text(self.tokenizer(list(texts)).to(self.device)))


class RoCOCOEmbedding(BaseModel):
    INTERLEAVE = True
    is_api = False
    allowed_types = ['text', 'image']
    BACKENDS = {'hf-clip': HFCLIPEmbedder, 'hf-blip': HFBLIPEmbedder,
                'open_clip': OpenCLIPEmbedder}

    def __init__(self, model_path=None, backend='hf-clip', device=None, precision='f32',
                 name=None):
        super().__init__()
        if not model_path or backend not in self.BACKENDS or precision not in ('f32', 'f16'):
            raise ValueError(f'RoCOCOEmbedding needs model_path, a backend in '
                             f'{sorted(self.BACKENDS)} and precision f32 or f16')
        if device is None:
            import torch
            device = 'cuda' if torch.cuda.is_available() else 'cpu'
        self.embedder = self.BACKENDS[backend](model_path, device)
        self.precision = precision

    # The kit's BaseModel.generate would read a caption naming an existing file as that file.
    def generate(self, message, dataset=None):
        if isinstance(message, str):
            message = [dict(type='text', value=message)]
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
            raise ValueError('RoCOCOEmbedding embeds one image or one caption per row (RoCOCO-I2T'
                             f' / T2I); got {len(images)} image(s) and {len(texts)} text(s) from '
                             f'{dataset}. Generative models take RoCOCO-MCQ-<attack>')
        from ..dataset.utils.rococo_retrieval import encode_vector
        return encode_vector(vec, self.precision)
