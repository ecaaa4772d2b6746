"""Where vlmeval-ext works around the kit: each module answers one problem of the installed VLMEvalKit, names the
fix offered upstream that removes it (upstream/*.patch, or none where the kit has nothing to fix), and a test fails
once the installed kit no longer has the problem (tests/plugin/test_upstream_patches.py,
`test_the_installed_kit_still_needs_each_workaround`).

- console.py: the kit logs judge arguments and `API Key: <key>`, and prints replies that may echo a key
  (upstream/0001-keep-api-keys-out-of-status-and-logs); also the .env notice at every import and the same kit line
  once per -RC variant (no patch: the kit's choices);
- checkpoints.py: a checkpoint cut by a killed write stops every later run (0002-atomic-dump); a reply with a lone
  surrogate cannot be stored (0003-storable-predictions); ms-vlmeval's empty run folders;
- kit_writes.py: a Ctrl-C in the middle of the kit's in-place `dump` cuts the file (0002-atomic-dump);
- served_names.py: `--model Qwen/X --base-url URL` makes a nested folder (0004-served-model-names-with-slash);
- verbatim.py: a resumed run reads a reply 'None' / 'NA' back as a missing value and writes 'nan'
  (0005-predictions-read-back-as-text);
- kit_help.py: `run.py --help` imports the whole kit (10-20 s) before printing (no patch: read from run.py's source);
- kit_names.py: only the imported kit knows its dataset names, so an unknown `--data` would wait for the import (no
  patch: kept per kit version);
- judge_resolution.py: only the kit's build_judge knows what a judge name resolves to (and so its verdicts' keys),
  so an evaluation whose every verdict is cached would still wait for the import (no patch: kept per kit version).

The kit's unlabelled progress bars (upstream/0006-progress-bar-labels) are answered where each bar starts: the
judge lines of the datasets and the launcher's line for an API model say what the next bar counts.
Nothing here changes the kit's code: every workaround acts on the kit's files, its inputs, or this process's
console and log records, at our boundary.
"""
