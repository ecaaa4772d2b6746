"""Tiny randomly initialised vision-language checkpoints, saved like hub checkpoints, for the kit's own model classes.

No weights can be downloaded here, so each checkpoint is built from its `transformers` config with a few small
layers and random weights, and a byte-level BPE tokenizer trained on the fly with `tokenizers`, carrying the
architecture's special tokens and chat template. The kit then loads the folder exactly as it loads a real
checkpoint (`from_pretrained` of the folder).

- `make_tiny_qwen2_vl(path)`: Qwen2-VL (`Qwen2VLForConditionalGeneration` + `Qwen2VLProcessor`), for the kit's
  `Qwen2VLChat`; about 0.2 M parameters.
- `make_tiny_paligemma(path)`: PaliGemma (`PaliGemmaForConditionalGeneration` + `PaliGemmaProcessor`), for the kit's
  `PaliGemma` (INTERLEAVE = False: one image per request).

Both write a `generation_config.json` whose `eos_token_id` lists the special tokens and every other token id, so that greedy
generation from random weights ends after a few tokens even where the kit class asks for 512 new tokens; the
replies are random text, never a benchmark's answer by design.
"""
from __future__ import annotations

import json


# Text the byte-level BPE is trained on: enough words of the benchmarks' prompts to give merges.
_CORPUS = [
    'Answer the question with a single number. What is the value of the slope of the line?',
    'Please answer with the letter of the correct option. A B C D E',
    'Describe this image in one sentence. The cat is sitting on a table near the window.',
    'Answer in JSON format with the key answer. How many objects are in the second image?',
    'reference distorted image blur noise compression brightness contrast chart plot axis value',
] * 20


def _bpe_tokenizer(special_tokens: list[str], vocab_size: int = 400):
    """A byte-level BPE tokenizer trained on `_CORPUS`, with `special_tokens` first in its vocabulary."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special_tokens,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_CORPUS, trainer=trainer)
    return tok


def _stop_early(path, model, specials: set[int]):
    """generation_config.json: every special token and every other token id end generation."""
    vocab = model.config.get_text_config().vocab_size
    eos = sorted(specials | set(range(0, vocab, 2)))
    config = {'eos_token_id': eos, 'pad_token_id': eos[0], 'do_sample': False}
    (path / 'generation_config.json').write_text(json.dumps(config))


def parameter_count(model) -> int:
    return sum(p.numel() for p in model.parameters())


QWEN2_VL_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def make_tiny_qwen2_vl(path):
    """A random Qwen2-VL (2 text layers of width 32, 1 vision block) with its processor, saved to `path`."""
    from transformers import (PreTrainedTokenizerFast, Qwen2VLConfig, Qwen2VLForConditionalGeneration,
                              Qwen2VLImageProcessor, Qwen2VLProcessor)
    import torch                 # here, not at import: collecting the tests stays fast
    torch.manual_seed(0)
    specials = ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<|vision_start|>', '<|vision_end|>',
                '<|image_pad|>', '<|video_pad|>']
    raw = _bpe_tokenizer(specials)
    ids = {t: raw.token_to_id(t) for t in specials}
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token='<|im_end|>', pad_token='<|endoftext|>',
                                        additional_special_tokens=specials[1:], chat_template=QWEN2_VL_CHAT_TEMPLATE,
                                        extra_special_tokens={'image_token': '<|image_pad|>',
                                                              'video_token': '<|video_pad|>'})
    config = Qwen2VLConfig(
        text_config=dict(vocab_size=raw.get_vocab_size(), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
                         rope_scaling={'type': 'mrope', 'mrope_section': [2, 3, 3]},
                         bos_token_id=ids['<|endoftext|>'], eos_token_id=ids['<|im_end|>'],
                         pad_token_id=ids['<|endoftext|>']),
        vision_config=dict(depth=1, embed_dim=32, hidden_size=32, num_heads=2, mlp_ratio=2, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2, in_channels=3),
        image_token_id=ids['<|image_pad|>'], video_token_id=ids['<|video_pad|>'],
        vision_start_token_id=ids['<|vision_start|>'], vision_end_token_id=ids['<|vision_end|>'])
    model = Qwen2VLForConditionalGeneration(config).eval()
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    pixels = 28 * 28
    image_processor = Qwen2VLImageProcessor(size={'shortest_edge': 4 * pixels, 'longest_edge': 16 * pixels},
                                            patch_size=14, merge_size=2, temporal_patch_size=2)
    kwargs = {}
    try:                                     # transformers >= 4.52 gives the processor a video processor
        from transformers import Qwen2VLVideoProcessor
        kwargs['video_processor'] = Qwen2VLVideoProcessor(patch_size=14, merge_size=2, temporal_patch_size=2)
    except ImportError:
        pass
    Qwen2VLProcessor(image_processor=image_processor, tokenizer=tokenizer, chat_template=QWEN2_VL_CHAT_TEMPLATE,
                     **kwargs).save_pretrained(path)
    _stop_early(path, model, set(ids.values()))
    return path, parameter_count(model)


def make_tiny_paligemma(path):
    """A random PaliGemma (2 Gemma layers of width 32, a 1-layer SigLIP on 28 px images) with its processor."""
    from transformers import (GemmaConfig, PaliGemmaConfig, PaliGemmaForConditionalGeneration, PaliGemmaProcessor,
                              PreTrainedTokenizerFast, SiglipImageProcessor, SiglipVisionConfig)
    import torch                 # here, not at import: collecting the tests stays fast
    torch.manual_seed(0)
    specials = ['<pad>', '<eos>', '<bos>', '<unk>', '<image>']
    raw = _bpe_tokenizer(specials)
    ids = {t: raw.token_to_id(t) for t in specials}
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw, pad_token='<pad>', eos_token='<eos>',
                                        bos_token='<bos>', unk_token='<unk>', additional_special_tokens=['<image>'],
                                        extra_special_tokens={'image_token': '<image>'})
    image_size, patch = 28, 14
    text = GemmaConfig(vocab_size=raw.get_vocab_size(), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=4096,
                       pad_token_id=ids['<pad>'], eos_token_id=ids['<eos>'], bos_token_id=ids['<bos>'],
                       tie_word_embeddings=False)
    vision = SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                image_size=image_size, patch_size=patch, projection_dim=32)
    config = PaliGemmaConfig(text_config=text.to_dict(), vision_config=vision.to_dict(),
                             image_token_index=ids['<image>'], projection_dim=32, hidden_size=32,
                             vocab_size=raw.get_vocab_size(), tie_word_embeddings=False)
    # (untied output embeddings: tied ones make a random model repeat its last input token, here a newline)
    model = PaliGemmaForConditionalGeneration(config).eval()
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    image_processor = SiglipImageProcessor(size={'height': image_size, 'width': image_size},
                                           image_seq_length=(image_size // patch) ** 2)
    PaliGemmaProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(path)
    _stop_early(path, model, set(ids.values()))
    return path, parameter_count(model)
