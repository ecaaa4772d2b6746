"""`vlmeval-ext corrupt-image IN --out-dir DIR [--distortion all|1,5,16] [--strength all|1,3] [--seed N] [--preview]`.

Writes DIR/dNN_sS.png for every chosen (distortion, strength); --preview also writes DIR/preview.png, one
labelled contact sheet of the chosen variants (all 99 by default).
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Sequence

from PIL import Image, ImageDraw, ImageFont

from vlmeval_ext.distortions import DISTORTION_IDS, STRENGTHS, approximations, corrupt, distortion_info

PNG_MODES = {'1', 'L', 'LA', 'I', 'I;16', 'P', 'RGB', 'RGBA'}


def parse_id_list(text: str, valid: Sequence[int], what: str) -> list[int]:
    """'all' or a comma list such as '1,5,16' -> sorted unique ids; anything else is a ValueError naming it."""
    text = text.strip()
    if text.lower() == 'all':
        return list(valid)
    ids = []
    for part in text.split(','):
        part = part.strip()
        if not part.isdigit() or int(part) not in valid:
            raise ValueError(f'unknown {what} {part!r} in {text!r}: choose from {valid[0]}-{valid[-1]} or "all"')
        ids.append(int(part))
    return sorted(set(ids))


def variant_filename(distortion: int, strength: int) -> str:
    return f'd{distortion:02d}_s{strength}.png'


def contact_sheet(tiles: list[tuple[str, Image.Image]], tile_side: int = 192, columns: int = 10) -> Image.Image:
    """Grid of labelled thumbnails (label above each image)."""
    font = ImageFont.load_default(size=max(10, tile_side // 14))
    label_h = max(14, tile_side // 9)
    rows = (len(tiles) + columns - 1) // columns
    sheet = Image.new('RGB', (columns * tile_side, rows * (tile_side + label_h)), 'white')
    draw = ImageDraw.Draw(sheet)
    for i, (label, img) in enumerate(tiles):
        thumb = img.convert('RGB')
        thumb.thumbnail((tile_side - 4, tile_side - 4))
        x, y = (i % columns) * tile_side, (i // columns) * (tile_side + label_h)
        draw.text((x + 3, y + 1), label, fill='black', font=font)
        sheet.paste(thumb, (x + (tile_side - thumb.width) // 2, y + label_h + (tile_side - thumb.height) // 2))
    return sheet


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='vlmeval-ext corrupt-image',
                                description="Apply R-Bench's 33 real-world distortions at strengths 1-3 to one image.")
    p.add_argument('image', help='input image (any format Pillow reads)')
    p.add_argument('--out-dir', required=True, help='folder for dNN_sS.png outputs')
    p.add_argument('--distortions', '--distortion', dest='distortions', default='all',
                   help='"all" or comma-separated ids 1-33 (e.g. 1,5,16)')
    p.add_argument('--strengths', '--strength', dest='strengths', default='all',
                   help='"all" or comma-separated strengths 1-3 (e.g. 1,3)')
    p.add_argument('--seed', type=int, default=0, help='random seed (same seed, same output)')
    p.add_argument('--preview', action='store_true', help='also write preview.png, a labelled contact sheet')
    return p


def corrupt_image_main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        distortions = parse_id_list(args.distortions, DISTORTION_IDS, 'distortion id')
        strengths = parse_id_list(args.strengths, STRENGTHS, 'strength')
    except ValueError as err:
        parser.error(str(err))  # exits with status 2 and the message
    src = Path(args.image)
    if not src.is_file():
        parser.error(f'input image not found: {src}')
    try:
        from PIL import ImageOps
        with Image.open(src) as opened:
            image = ImageOps.exif_transpose(opened)   # as shown: the variants carry no orientation tag
    except (OSError, ValueError, Image.DecompressionBombError) as err:   # truncated, not an image, ...
        from vlmeval_ext.errors import ExtError
        raise ExtError(f'corrupt-image: {src} cannot be read as an image ({type(err).__name__}: {err})') from None
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if image.mode not in PNG_MODES:
        print(f'note: PNG cannot store mode {image.mode}; outputs are written as RGB')

    from tqdm import tqdm  # only the CLI needs a progress bar

    tiles = []
    jobs = [(d, s) for d in distortions for s in strengths]
    for d, s in tqdm(jobs, desc='corrupt-image', unit='variant'):
        out = corrupt(image, d, s, args.seed)
        writable = out if out.mode in PNG_MODES else out.convert('RGB')
        writable.save(out_dir / variant_filename(d, s), compress_level=1)  # fast; PNG stays lossless
        if args.preview:
            tiles.append((f"d{d:02d} s{s} {distortion_info(d)['name']}", out))
    print(f'wrote {len(jobs)} images to {out_dir}')
    approx = sorted(set(distortions) & set(approximations()))
    if approx:
        names = ', '.join(f"{d} {distortion_info(d)['name']}" for d in approx)
        print(f"approximations of R-Bench's real captures/models (see dataset_specs/corrupt.yaml): {names}")
    if args.preview:
        contact_sheet([('clean', image)] + tiles).save(out_dir / 'preview.png')
        print(f'wrote {out_dir / "preview.png"}')
    return 0


def corrupt_dataset_main(argv: Sequence[str] | None = None) -> int:
    """`vlmeval-ext corrupt --data NAME [NAME ...] [--distortions ...] [--strengths ...] [--sample N] [--seed S]`."""
    p = argparse.ArgumentParser(prog='vlmeval-ext corrupt',
                                description='Build <NAME>-RC: each item as a reference row plus one distorted row '
                                            'per chosen distortion and strength, linked by pair_id.')
    p.add_argument('--data', required=True, nargs='+',
                   help='kit image dataset(s) whose TSV is in $LMUData (else the kit downloads it)')
    p.add_argument('--distortions', '--distortion', dest='distortions', default='all',
                   help='"all" or comma-separated ids 1-33')
    p.add_argument('--strengths', '--strength', dest='strengths', default='all',
                   help='"all" or comma-separated strengths 1-3')
    p.add_argument('--sample', type=int, default=None, help='sample N questions (default: all)')
    p.add_argument('--seed', type=int, default=0)
    args = p.parse_args(argv)
    if args.sample is not None and args.sample < 1:
        from vlmeval_ext.errors import ExtError
        raise ExtError(f'corrupt: --sample {args.sample}: give a number of questions of at least 1 (leave --sample '
                       'out to use every question)')
    try:
        distortions = parse_id_list(args.distortions, DISTORTION_IDS, 'distortion id')
        strengths = parse_id_list(args.strengths, STRENGTHS, 'strength')
    except ValueError as err:
        p.error(str(err))

    import pandas as pd

    from vlmeval_ext.io import DataError, lmu_data_root, write_kit_tsv
    from vlmeval_ext.corrupt.report import approximation_note
    from vlmeval_ext.corrupt.variants import RC_SUFFIX, build_rc_frame, rc_name

    try:
        root = Path(lmu_data_root())
    except DataError as err:
        p.error(str(err))
    for name in args.data:
        if name.endswith(RC_SUFFIX):
            p.error(f'{name} is already a robustness variant; corrupt its base dataset instead')
        src = root / f'{name}.tsv'
        if not src.is_file():  # only then import the kit (slow): let it download its own dataset
            from vlmeval.dataset import build_dataset
            try:
                built = build_dataset(name)
            except Exception as err:  # the kit raises a bare Exception when its download fails
                raise DataError(f'corrupt: no TSV for dataset {name!r} at {src}, and the kit could not fetch it '
                                f'({type(err).__name__}: {str(err)[:200]}); put {name}.tsv under {root} (offline: '
                                'copy it from a machine that has it)') from None
            if built is None or not src.is_file():
                raise DataError(f'corrupt: no TSV for dataset {name!r} at {src}, and the kit could not fetch it')
        base = pd.read_csv(src, sep='\t', dtype={'image': str}, keep_default_na=False)
        rc = build_rc_frame(base, distortions, strengths, args.sample, args.seed, path=str(src))
        out = write_kit_tsv(rc, root / f'{rc_name(name)}.tsv')
        # images the kit decoded for an earlier build of this name would be reused by index: drop them
        shutil.rmtree(root / 'images' / rc_name(name), ignore_errors=True)
        n_items = int((rc['variant'] == 'ref').sum())
        print(f'wrote {out}: {n_items} reference rows + {len(rc) - n_items} distorted rows '
              f'({len(distortions)} distortions x {len(strengths)} strengths)')
        print(f'run it: python run.py --data {rc_name(name)} --model MODEL')
    note = approximation_note(distortions)
    if note:
        print(note)
    return 0


if __name__ == '__main__':
    raise SystemExit(corrupt_image_main())
