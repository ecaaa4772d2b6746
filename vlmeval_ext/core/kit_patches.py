"""Two small, named corrections to the kit's own file handling, applied by our launcher before the kit runs.

1. The kit stores sys.argv in status.json, so a `--judge-key` lands there in clear text: mask it.
2. The kit rewrites its prediction checkpoints and result files in place (open 'wb', then write): a SIGKILL in
   the middle leaves a torn pickle, and the next run cannot load it, losing every finished prediction. Write to
   a temporary file and rename (atomic), and refuse the kit's silent xlsx -> pkl fallback.

Both are patched in `vlmeval.smp` and in every already-imported kit module that bound the original by name
(`from vlmeval.smp import dump`), so ms-vlmeval and an upstream run.py both pick them up.
"""
from __future__ import annotations

import os
import sys

SECRET_FLAGS = ('--judge-key', '--key', '--api-key')


def mask_secret_args(argv) -> list[str]:
    """argv with the values of key flags masked (`--judge-key K` and `--judge-key=K`)."""
    from vlmeval_ext.core.secrets import MASK
    out, hide_next = [], False
    for arg in argv:
        if hide_next:
            out.append(MASK)
            hide_next = False
        elif arg in SECRET_FLAGS:
            out.append(arg)
            hide_next = True
        elif arg.startswith(tuple(f + '=' for f in SECRET_FLAGS)):
            out.append(arg.split('=', 1)[0] + '=' + MASK)
        else:
            out.append(arg)
    return out


def _replace_everywhere(name: str, original, replacement) -> None:
    for module_name, module in list(sys.modules.items()):
        if module_name.startswith('vlmeval') and getattr(module, name, None) is original:
            setattr(module, name, replacement)


def keep_keys_out_of_status_files() -> None:
    import vlmeval.smp as smp
    original = smp.upsert_run_status
    if getattr(original, '_vlmeval_ext', False):
        return

    def upsert_run_status(run_dir, **fields):
        if fields.get('argv') is not None:
            fields['argv'] = mask_secret_args(fields['argv'])
        return original(run_dir, **fields)

    upsert_run_status._vlmeval_ext = True
    _replace_everywhere('upsert_run_status', original, upsert_run_status)


def make_kit_writes_atomic() -> None:
    import vlmeval.smp as smp
    original = smp.dump
    if getattr(original, '_vlmeval_ext', False):
        return

    def dump(data, f, **kwargs):
        base, ext = os.path.splitext(str(f))
        tmp = f'{base}.partial{os.getpid()}{ext}'
        result = original(data, tmp, **kwargs)
        if not os.path.exists(tmp):
            # The kit fell back to another format (it writes <name>.pkl and logs a warning): make it an error.
            raise RuntimeError(f'could not write {f} as {ext[1:]} (install xlsxwriter and openpyxl, or set '
                               'PRED_FORMAT=tsv)')
        os.replace(tmp, f)
        return result

    dump._vlmeval_ext = True
    _replace_everywhere('dump', original, dump)


def apply_all() -> None:
    keep_keys_out_of_status_files()
    make_kit_writes_atomic()
