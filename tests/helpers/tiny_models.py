"""Tiny randomly initialised CLIP checkpoints built from configs, saved like a hub checkpoint: what the embedding
model tests load (no weights can be downloaded here)."""
from __future__ import annotations


def byte_symbols():
    """The 256 printable stand-ins byte-level BPE uses for raw bytes (GPT-2 / CLIP convention)."""
    keep = [*range(ord('!'), ord('~') + 1), *range(ord('¡'), ord('¬') + 1), *range(ord('®'), ord('ÿ') + 1)]
    extra = [b for b in range(256) if b not in keep]
    return [chr(b) for b in keep] + [chr(256 + i) for i in range(len(extra))]


def make_tiny_clip(path):
    """A random 2-layer CLIP with a character-level BPE tokenizer, saved like a hub checkpoint."""
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, CLIPTokenizer
    import torch                 # here, not at import: collecting the tests stays fast
    torch.manual_seed(0)
    symbols = byte_symbols()
    vocab = {s: i for i, s in enumerate(symbols)}
    vocab.update({s + '</w>': len(symbols) + i for i, s in enumerate(symbols)})
    vocab.update({'<|startoftext|>': len(vocab), '<|endoftext|>': len(vocab) + 1})
    path.mkdir(parents=True)
    tok = CLIPTokenizer(vocab=vocab, merges=[])                       # no merges: character-level BPE
    cfg = CLIPConfig(text_config=dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=40,
                                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                      pad_token_id=tok.pad_token_id),
                     vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=2, image_size=32, patch_size=8),
                     projection_dim=16)
    CLIPModel(cfg).save_pretrained(path)
    improc = CLIPImageProcessor(size={'shortest_edge': 32}, crop_size={'height': 32, 'width': 32})
    CLIPProcessor(image_processor=improc, tokenizer=tok).save_pretrained(path)
    return path
