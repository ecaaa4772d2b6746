"""`python run.py ...` / `vlmeval-ext run ...`: VLMEvalKit's own run.py, with our datasets registered.

Every kit flag works unchanged: the kit parses them. The launcher finds the kit's entry point (ms-vlmeval's
`vlmeval.run`, else the `run.py` of the installed upstream checkout beside its `vlmeval` package;
VLMEVALKIT_RUN_PY=/path/to/run.py overrides both), calls `vlmeval_ext.register()`, and adds these steps around the
kit's run, each at our boundary (nothing of the kit is changed at run time):

before the kit is imported (one line and exit 2 for every problem, in about a second)
- keys never reach the kit's argv, config or logs: `--judge-key`, `--key` (in any spelling the kit's parser
  accepts), and every value of every option and of every --config entry, whatever its depth, is checked for a
  credential (a key-shaped value, `user:password@` or `?api-key=` in a URL, a field named like a key);
- our judge options in --judge-args (judge_mode, cache, judge_retries, judge_backoff, judge_retry_rejected) are
  checked, and taken out of what the kit sees (the kit would send them to the judges of its own datasets);
- $LMUData must exist; our datasets must be prepared (or be demo splits); PRED_FORMAT must be one our scoring
  reads; a --config must be a JSON object with its `data` a table;
after the kit is imported
- the kit's own parser reads the arguments (the definitive view: abbreviations, defaults), and the checks run again
  on it; names neither the kit nor we know stop with a "did you mean";
- a served model name with '/' (`--model Qwen/Qwen2-VL-7B-Instruct --base-url URL`) is registered under a safe
  folder name (vlmeval_ext.io.safe_name), its client built by the kit's own `build_model_from_base_url`; the name
  sent to the server stays the one given;
- an API model and an API judge each get one test call; the verdict cache is opened;
- one run per model x dataset: a lock per combination (a second run on other datasets of the same work dir goes on);
- the kit reuses what earlier runs of this work dir saved (`--reuse` is always handed to it), and one line says so;
during: what the kit prints is masked of configured keys; Ctrl-C stops the calls (vlmeval_ext.interrupt), one line,
exit 130;
after (rank 0)
- a combination the kit recorded as failed, one whose predictions all failed, or one of ours left without a score
  file exits 1 with one line each, whatever the kit's status says;
- the run records (manifest, paper comparison) of each of our datasets; one table of every model x dataset;
  the HTML report of the work dir.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import difflib
import importlib.util
import json
import os
import runpy
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from vlmeval_ext.errors import EndpointUnavailable, ExtError, KitEntryPointNotFound, RefusedArgument, report
from vlmeval_ext.kit_workarounds.checkpoints import (checkpoint_files, kit_run_dirs, remove_empty_run_dirs,
                                                     repair_unstorable_replies, set_aside_unloadable)
from vlmeval_ext.kit_workarounds.kit_names import known_dataset_names
from vlmeval_ext.locks import LOCK_DIR, open_lock_file

PREFIX = '[vlmeval-ext]'
RUN_PY_OVERRIDE = 'VLMEVALKIT_RUN_PY'
PROBE_PROMPT = 'Connection test: reply with OK.'
PRED_FORMAT = 'PRED_FORMAT'          # the kit's option (vlmeval.smp.file.get_pred_file_format)
READABLE_FORMATS = ('tsv', 'xlsx')


def say(message: str, level: str = 'INFO') -> None:
    print(f'{PREFIX} {level}: {message}', file=sys.stderr, flush=True)


# ---- the kit's entry point -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class KitEntry:
    """How to run the kit's main: a module (`python -m vlmeval.run`) or a script (an upstream `run.py`)."""
    kind: str           # 'module' or 'script'
    target: str         # module name or script path
    source: str         # the file holding the kit's argument parser

    def run(self) -> None:
        if self.kind == 'module':
            runpy.run_module(self.target, run_name='__main__', alter_sys=True)
        else:
            runpy.run_path(self.target, run_name='__main__')

    def namespace(self) -> dict:
        """The kit's run module's functions (not its main), read from its file under another name: importing
        `vlmeval.run` here would make `run()` warn that the module is in sys.modules already."""
        return runpy.run_path(self.source, run_name='vlmeval_kit_run')


def find_kit_entry() -> KitEntry:
    override = os.environ.get(RUN_PY_OVERRIDE)
    if override:
        if not os.path.isfile(override):
            raise KitEntryPointNotFound(f'{RUN_PY_OVERRIDE}={override} is not a file')
        return KitEntry('script', override, override)
    from vlmeval_ext.errors import KitNotInstalled
    from vlmeval_ext.registry import KIT_MISSING
    spec = importlib.util.find_spec('vlmeval')           # located, not imported
    if spec is None or not spec.origin:
        raise KitNotInstalled(KIT_MISSING.format(err="No module named 'vlmeval'"))
    package = Path(spec.origin).resolve().parent
    if (package / 'run.py').is_file():
        return KitEntry('module', 'vlmeval.run', str(package / 'run.py'))
    run_py = package.parent / 'run.py'
    if run_py.is_file() and 'vlmeval' in run_py.read_text(encoding='utf-8', errors='replace'):
        return KitEntry('script', str(run_py), str(run_py))
    raise KitEntryPointNotFound(
        f'found VLMEvalKit at {package} but neither its module vlmeval.run (ms-vlmeval) nor a run.py beside it '
        f'({run_py}; an editable install of a VLMEvalKit checkout has one). Install the kit with '
        "`pip install -e /path/to/VLMEvalKit` or `pip install ms-vlmeval==0.0.20`, or set "
        f'{RUN_PY_OVERRIDE}=/path/to/VLMEvalKit/run.py')


# ---- reading the command line before the kit is imported ----------------------------------------------------------
class _ParseError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise _ParseError(message)


_EARLY_OPTIONS = {
    '--data': dict(nargs='+', default=[]), '--model': dict(nargs='+', default=[]), '--config': {},
    '--work-dir': dict(default='./outputs'), '--mode': dict(default='all'), '--judge': {}, '--judge-args': {},
    '--judge-base-url': {}, '--base-url': {}, '--api-mode': dict(action='store_true'), '--reuse': dict(
        action='store_true'),
}


def early_args(argv) -> argparse.Namespace:
    """Our first view of the command line (exact option names): what can be checked before the kit's import.
    The kit's own parser gives the definitive view afterwards (kit_args)."""
    parser = _Parser(add_help=False, allow_abbrev=False)
    for name, kwargs in _EARLY_OPTIONS.items():
        parser.add_argument(name, **kwargs)
    try:
        args, _ = parser.parse_known_args(list(argv))
    except _ParseError as err:
        raise RefusedArgument(f'run.py: {err}') from None
    return args


def kit_args(kit_ns: dict, entry: KitEntry, argv) -> argparse.Namespace:
    """The kit's own parser on the command line (its abbreviations and defaults)."""
    saved = sys.argv
    sys.argv = [entry.target, *argv]
    try:
        return kit_ns['parse_args']()
    finally:
        sys.argv = saved


# ---- keys ------------------------------------------------------------------------------------------------------
KEY_HOMES = {
    '--judge-key': 'OPENAI_API_KEY (the kit\'s judges read it from the environment)',
    '--key': 'LMDEPLOY_API_KEY (the kit\'s --base-url model reads it from the environment)',
}


def _secret_in(value, where: str) -> str | None:
    """Where a credential sits in a value (a URL, a JSON text, a mapping or a list), or None."""
    from vlmeval_ext.secrets import is_secret_key_name, looks_like_secret
    if isinstance(value, dict):
        for k, v in value.items():
            if is_secret_key_name(k) and v not in (None, '', False):
                return f'{where}: field {k!r}'
            found = _secret_in(v, f'{where}.{k}')
            if found:
                return found
        return None
    if isinstance(value, (list, tuple)):
        return next((f for f in (_secret_in(v, f'{where}[{i}]') for i, v in enumerate(value)) if f), None)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text[:1] in '{[':
        try:
            return _secret_in(json.loads(text), where)
        except ValueError:
            pass
    if '://' in text:
        parts = urlsplit(text)
        if parts.username or parts.password:
            return f'{where}: credentials in the URL (user:password@host)'
        if any(is_secret_key_name(k) for k, _ in parse_qsl(parts.query)):
            return f'{where}: a key in the URL query (?{parts.query.split("=")[0]}=...)'
    if looks_like_secret(text):
        return f'{where}: a value shaped like an API key'
    return None


def refuse_secrets(argv, config: dict | None = None) -> None:
    """No key reaches the kit's argv (it stores it in status.json and logs its judge arguments) or its config."""
    for token in argv:
        name = token.split('=', 1)[0]
        for flag, home in KEY_HOMES.items():
            # the option itself, or an abbreviation the kit's parser takes for it ('--judge-k')
            if name == flag or (flag == '--judge-key' and len(name) >= len('--judge-k') and flag.startswith(name)):
                raise RefusedArgument(f'{flag} would be written into the kit\'s status.json and logs; put the key '
                                      f'in {home} instead')
    for i, token in enumerate(argv):
        if token.startswith('--') and '=' in token:
            option, value = token.split('=', 1)
        else:
            before = argv[i - 1] if i else ''
            option = before if before.startswith('-') and '=' not in before else f'argument {i + 1}'
            value = token
        found = _secret_in(value, option)
        if found:
            raise RefusedArgument(f'{found}: the kit would write it into its status.json and logs; put keys in '
                                  'the environment (OPENAI_API_KEY, LMDEPLOY_API_KEY) instead')
    if config is not None:
        found = _secret_in(config, '--config')
        if found:
            raise RefusedArgument(f'{found}: the kit would write it into its logs; give the URL without credentials '
                                  'and keys in the environment')


# ---- what the run covers ---------------------------------------------------------------------------------------
@dataclass
class RunPlan:
    models: list[str]                       # as the kit will name their folders
    datasets: list[str]
    work_dir: str                           # absolute
    config: dict = field(default_factory=dict)
    served: dict = field(default_factory=dict)      # folder name -> {served name, endpoint, generation arguments}

    def model_dir(self, model: str) -> Path:
        return Path(self.work_dir) / model

    def model_dirs(self) -> dict[str, Path]:
        return {model: self.model_dir(model) for model in self.models}


def read_config(path: str | None) -> dict:
    if not path:
        return {}
    try:
        config = json.loads(Path(path).read_text(encoding='utf-8'))
    except (OSError, ValueError) as err:
        raise ExtError(f'--config {path}: cannot be read as JSON ({err})') from None
    if not isinstance(config, dict):
        raise ExtError(f'--config {path}: must be a JSON object {{"model": {{...}}, "data": {{...}}}}, not a '
                       f'{type(config).__name__}')
    for section in ('model', 'data'):
        if section in config and not isinstance(config[section], dict):
            raise ExtError(f'--config {path}: "{section}" must be an object (name -> settings), not '
                           f'{json.dumps(config[section])[:40]}')
    return config


def config_dataset_names(config: dict, datasets) -> list[str]:
    names = []
    for key, entry in (config.get('data') or {}).items():
        names.append(entry.get('dataset', key) if isinstance(entry, dict) else key)
    return names or list(datasets)


def plan_of(args, config: dict) -> RunPlan:
    from vlmeval_ext.io import safe_name
    if config:
        models, datasets = list(config.get('model') or {}), config_dataset_names(config, [])
    else:
        models, datasets = list(args.model or []), list(args.data or [])
    if getattr(args, 'api_mode', False):
        models = [m.replace('/', '--') for m in models]     # the kit's folder name in API mode
        work_dir = args.work_dir
    else:
        work_dir = os.environ.get('MMEVAL_ROOT', args.work_dir)
        if getattr(args, 'base_url', None) and not config:
            models = [safe_name(m) for m in models]
    return RunPlan(models, datasets, str(Path(work_dir).resolve()), config)


def _ours(name: str) -> bool:
    from vlmeval_ext.registry import benchmark_of
    return benchmark_of(name) is not None


def check_our_datasets(names) -> None:
    """Our datasets of the run must be buildable now: a demo split, or a prepared TSV (else one line: how)."""
    from vlmeval_ext.io import lmu_data_root
    from vlmeval_ext.registry import RC_SUFFIX, benchmark_of
    root = lmu_data_root()            # a LMUData naming no folder is one line here
    for name in names:
        record = benchmark_of(name)
        if record is None or name in record.demos:
            continue
        if name.endswith(RC_SUFFIX) and not os.path.exists(os.path.join(root, f'{name}.tsv')):
            raise ExtError(f'{name}: {root}/{name}.tsv not found; build it with `vlmeval-ext corrupt --data '
                           f'{name[:-len(RC_SUFFIX)]}`')
        split = record.split_of(name)
        if not name.endswith(RC_SUFFIX) and not os.path.exists(os.path.join(root, f'{split}.tsv')):
            raise ExtError(f'{name} is not prepared ({root}/{split}.tsv not found): run `vlmeval-ext prepare '
                           f'{name}` (offline: `--from DIR`), or run its demo split '
                           f'{next(iter(record.demos), "")}'.rstrip())


def check_prediction_format(names, environ) -> tuple[str | None, str | None]:
    """(value to give the kit's PRED_FORMAT or None, the line to say) for a run of these datasets.

    Our datasets are scored from the model's exact text, which the kit's default xlsx does not keep (a cell holds
    at most 32,767 characters, ms-vlmeval writes a reply starting with '=' as a live formula). When every dataset of
    the run is ours and PRED_FORMAT is not set, the run writes TSV; otherwise the user's choice stands, and a format
    our scoring cannot read is refused."""
    names = list(names)
    ours = [n for n in names if _ours(n)]
    if not ours:
        return None, None
    chosen = environ.get(PRED_FORMAT, '').strip().lower()
    if chosen and chosen not in READABLE_FORMATS:
        raise ExtError(f'{PRED_FORMAT}={chosen}: the predictions of {", ".join(ours)} are scored from tsv or xlsx '
                       f'files; set {PRED_FORMAT}=tsv (keeps every reply verbatim) or unset it')
    if chosen == '' and len(ours) == len(names):
        return 'tsv', f'predictions written as TSV: every reply verbatim ({PRED_FORMAT}=xlsx to change)'
    if chosen in ('', 'xlsx'):
        why = 'the kit\'s default' if chosen == '' else f'{PRED_FORMAT}=xlsx'
        return None, (f'predictions of {", ".join(ours)} are written as xlsx ({why}): a reply longer than 32,767 '
                      'characters is cut by the spreadsheet and its evaluation stops with a line naming the rows; '
                      f'{PRED_FORMAT}=tsv keeps every reply verbatim')
    return None, None


def judge_options_of(judge_args: str | None) -> tuple[dict, dict]:
    """(--judge-args without our options, our options checked): ours never reach the kit."""
    from vlmeval_ext.judging import PLUGIN_OPTIONS, PROTOCOL_OPTIONS, check_judge_options
    if not judge_args:
        return {}, {}
    try:
        parsed = json.loads(judge_args)
    except ValueError as err:
        raise RefusedArgument(f'--judge-args is not valid JSON ({err}): {judge_args[:80]!r}') from None
    if not isinstance(parsed, dict):
        raise RefusedArgument(f'--judge-args must be a JSON object, e.g. {{"judge_mode": "efficient"}}; got '
                              f'{judge_args[:80]!r}')
    ours = {k: parsed.pop(k) for k in (*PLUGIN_OPTIONS, *PROTOCOL_OPTIONS) if k in parsed}
    return parsed, check_judge_options(ours)


OURS_IN_SHORT = ('R-Bench-Full[-MCQ|-VQA|-CAP], GRAB, ReMI[_labelled|_composite], RoCOCO-MCQ-<attack>, '
                 'RoCOCO-I2T-<clean|attack>, RoCOCO-T2I-<mix|patch>, their *_DEMO splits and <Dataset>-RC')


def unknown_dataset_lines(names, known: list[str]) -> list[str]:
    """Names not in `known` (the kit's and ours) and with no TSV under $LMUData, each with a "did you mean"."""
    from vlmeval_ext.io import lmu_data_root
    lines = []
    for name in names:
        if name in known or _ours(name) or os.path.exists(os.path.join(lmu_data_root(), f'{name}.tsv')):
            continue
        near = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f'; did you mean {", ".join(near)}?' if near else ''
        lines.append(f'unknown dataset {name!r} (neither the kit nor vlmeval-ext has it, and '
                     f'{lmu_data_root()}/{name}.tsv does not exist){hint} vlmeval-ext has {OURS_IN_SHORT} '
                     '(`vlmeval-ext list`)')
    return lines


def rule_scored_run(args, datasets) -> bool:
    """True when no --judge was given and every dataset of the run is ours and asks no judge: the kit would
    otherwise configure (and log) its default judge for an MCQ dataset (gpt-4o-mini for RoCOCO-MCQ) that nothing
    calls; `exact_matching` is the kit's own name for "no judge"."""
    from vlmeval_ext.registry import CORRUPTED, benchmark_of
    records = [benchmark_of(name) for name in datasets]       # an -RC is scored by its base dataset's own rule
    return getattr(args, 'judge', None) is None and bool(records) and all(
        r is not None and r is not CORRUPTED and r.judge in ('rules', 'embeddings') for r in records)


def with_option(argv: list[str], option: str, value: str | None) -> list[str]:
    """argv with every occurrence of `option` (and its value) replaced by one `option value` at the end (or
    removed when value is None)."""
    out, skip = [], False
    for token in argv:
        if skip:
            skip = False
            continue
        if token == option:
            skip = True
            continue
        if token.startswith(option + '='):
            continue
        out.append(token)
    return out + ([option, value] if value is not None else [])


# ---- served model names ------------------------------------------------------------------------------------------
def serve_models(kit_ns: dict, args, plan: RunPlan, argv: list[str]) -> list[str]:
    """--base-url models under their safe folder names (vlmeval_ext.kit_workarounds.served_names). Returns the argv
    the kit gets (--model with the folder names, no --base-url). Recorded in plan.served."""
    if not args.base_url or plan.config or getattr(args, 'api_mode', False):
        return argv
    from vlmeval_ext.kit_workarounds.served_names import serve_under_safe_names
    served = serve_under_safe_names(kit_ns['build_model_from_base_url'](args), args.model)
    plan.served.update(served)
    argv = with_option(with_option(argv, '--base-url', None), '--model', None)
    return [*argv, '--model', *served]


# ---- models that cannot take a dataset -------------------------------------------------------------------------
def model_class(plan: RunPlan, name: str):
    """The kit class of a model of the run (its supported_VLM entry, or its --config "class"), without building
    it; None when the kit does not say."""
    import vlmeval.api as kit_api
    import vlmeval.vlm as kit_vlm
    from vlmeval.config import supported_VLM
    entry = (plan.config.get('model') or {}).get(name) if plan.config else None
    if isinstance(entry, dict) and 'class' in entry:
        return getattr(kit_vlm, str(entry['class']), None) or getattr(kit_api, str(entry['class']), None)
    factory = supported_VLM.get(name)
    func = getattr(factory, 'func', factory)
    return func if isinstance(func, type) else None


def one_image_model_lines(plan: RunPlan, argv: list[str]) -> list[str]:
    """One line per model x ReMI dataset whose questions the model could not receive: the interleaved and labelled
    modes with a model class of INTERLEAVE = False, which the kit's BaseModel.message_to_promptimg sends the first
    image and the joined texts only. Checked before any model is built."""
    from vlmeval_ext.dataset.utils.remi import split_and_mode
    from vlmeval_ext.registry import benchmark_of
    lines = []
    for model in plan.models:
        cls = model_class(plan, model)
        if cls is None or getattr(cls, 'INTERLEAVE', True) is not False:
            continue
        for dataset in plan.datasets:
            record = benchmark_of(dataset)
            if record is None or record.key != 'ReMI' or split_and_mode(dataset)[1] == 'composite':
                continue
            composite = split_and_mode(dataset)[0] + '_composite'
            if plan.config:
                instead = (f'name {composite} instead of {dataset} in the --config file ("data": {{"{composite}": '
                           f'{{"class": "ReMI", "dataset": "{composite}"}}}})')
            else:
                instead = ' '.join(['python run.py', *[composite if t == dataset else t for t in argv]])
            lines.append(f'{model} ({cls.__name__}, INTERLEAVE = False) takes one image: the kit would send it only the '
                         f'first of the up to six images of each {dataset} question, and the score would not be '
                         f"ReMI's. Run the one-image input mode instead: {instead}")
    return lines


def generative_on_retrieval_lines(plan: RunPlan, served: bool) -> list[str]:
    """One line per model x RoCOCO retrieval dataset where the model is not an embedding model: retrieval ranks
    the embeddings such a model returns; a generative model would be asked about every gallery row (paid inference)
    before the evaluation could only refuse its replies. `served`: the models are served (--base-url), hence
    generative. Checked before any model is built."""
    from vlmeval_ext.registry import BENCHMARKS, benchmark_of
    from vlmeval_ext.vlm.rococo_embedding import RoCOCOEmbedding
    retrieval = [d for d in plan.datasets if (benchmark_of(d) or None) and benchmark_of(d).judge == 'embeddings']
    if not retrieval:
        return []
    embedders = sorted(next(r for r in BENCHMARKS if r.judge == 'embeddings').kit_models)
    lines = []
    for model in plan.models:
        cls = None if served else model_class(plan, model)
        if served or (cls is not None and not issubclass(cls, RoCOCOEmbedding)):
            kind = 'a model served at --base-url' if served else cls.__name__
            lines.append(f'{model} ({kind}) is not an embedding model: {", ".join(retrieval)} rank the embeddings '
                         f'of images and captions; evaluate generative models on RoCOCO-MCQ-<attack>, and '
                         f'retrieval with an embedding model ({", ".join(embedders)})')
    return lines


# ---- endpoint checks -------------------------------------------------------------------------------------------
def api_model_builders(plan: RunPlan) -> dict:
    """{model folder: zero-argument builder} for the API models of the run, built as the kit builds them."""
    import vlmeval.api as kit_api
    from vlmeval.api.base import BaseAPI
    from vlmeval.config import supported_VLM
    builders = {}
    for name in plan.models:
        entry = plan.config.get('model', {}).get(name) if plan.config else None
        if isinstance(entry, dict) and 'class' in entry:
            cls = getattr(kit_api, entry['class'], None)
            if isinstance(cls, type) and issubclass(cls, BaseAPI):
                kwargs = {k: v for k, v in entry.items() if k != 'class'}
                builders[name] = lambda cls=cls, kwargs=kwargs: cls(**kwargs)
            continue
        factory = supported_VLM.get(name)
        func = getattr(factory, 'func', factory)
        if isinstance(func, type) and issubclass(func, BaseAPI):
            builders[name] = factory
    return builders


def served_models_line(api_base: str) -> str:
    """'it serves: a, b' from the server's GET /v1/models, or '' when it does not say."""
    import requests
    url = api_base.split('/chat/completions')[0].rstrip('/') + '/models'
    try:
        names = [m.get('id') for m in requests.get(url, timeout=5).json().get('data', [])]
    except (requests.RequestException, ValueError, AttributeError):
        return ''
    return f'; it serves: {", ".join(map(str, names))}' if names else ''


def model_preflight(name: str, build, served: dict | None = None) -> None:
    """One test call to an API model through the kit's own client; EndpointUnavailable with the server's own text."""
    from vlmeval_ext.predictions import is_kit_failure
    try:
        model = build()
    except Exception as err:  # the kit's API classes raise anything from their constructors
        raise EndpointUnavailable(f'API model {name} could not be built ({type(err).__name__}: {err}); check '
                                  '--base-url or the api_base of --config and the model key') from err
    model.retry, model.wait, model.verbose = 1, 0, False     # our own probe instance; the run builds its own
    try:
        code, answer, response = model.generate_inner([{'type': 'text', 'value': PROBE_PROMPT}])
    except Exception as err:  # the kit's wrappers raise from requests/json
        code, answer, response = -1, None, f'{type(err).__name__}: {err}'
    if code == 0 and isinstance(answer, str) and answer.strip() and not is_kit_failure(answer):
        return
    text = getattr(response, 'text', None)
    text = ' '.join(str(text if text is not None else response or answer or '').split())[:200]
    status = getattr(response, 'status_code', None)
    api_base = str(getattr(model, 'api_base', '') or '')
    where = urlsplit(api_base).netloc or 'its endpoint'
    sent = (served or {}).get('served_name', getattr(model, 'model', name))
    if status == 404 and 'does not exist' in text.lower():
        raise EndpointUnavailable(f'the server at {where} is up but serves no model named {sent!r}'
                                  f'{served_models_line(api_base)} (server: {text}); give --model the name it serves')
    raise EndpointUnavailable(f'API model {name} did not answer a test call at {where} ('
                              f'{f"HTTP {status}: " if status else ""}{text or "no reply"}); check that the server is '
                              'up, --base-url or the api_base of --config, and the model key. Nothing was run')


def judge_preflight(args, judge_kwargs: dict, names) -> None:
    """With an API --judge for one of our judged datasets: one tiny call to exactly the endpoint the evaluation will
    call (--judge-base-url, or api_base in --judge-args), before inference."""
    from vlmeval_ext.judging import OFFLINE_JUDGES, CachedJudge, build_kit_judge
    from vlmeval_ext.registry import benchmark_of
    if not args.judge or args.judge in OFFLINE_JUDGES or args.judge == 'exact_matching' or args.mode == 'infer':
        return
    if not any((benchmark_of(n) or None) and benchmark_of(n).judge in ('optional', 'required') for n in names):
        return
    kwargs = {k: v for k, v in judge_kwargs.items() if k != 'model'}
    CachedJudge(build_kit_judge(args.judge, **kwargs), args.judge, store=None).preflight()


def judge_kwargs_of(args, judge_args: dict) -> dict:
    """The judge arguments a dataset's evaluate gets, for run.py and `vlmeval-ext eval` alike: `judge_args` (from
    --judge-args), then --judge, --judge-base-url and --judge-timeout (a timeout in --judge-args wins)."""
    kwargs = dict(judge_args)
    if getattr(args, 'judge', None):
        kwargs['model'] = args.judge
    if getattr(args, 'judge_base_url', None):
        kwargs['api_base'] = f"{args.judge_base_url.rstrip('/')}/chat/completions"
    if getattr(args, 'judge_timeout', None):
        kwargs.setdefault('timeout', args.judge_timeout)
    return kwargs


def prediction_files_of_ours(plan: RunPlan) -> list[Path]:
    """The predictions files earlier runs of this work dir left for our datasets of the run."""
    return [path for model in plan.models for run_dir in kit_run_dirs(plan.model_dir(model))
            for dataset in plan.datasets if _ours(dataset)
            for path in checkpoint_files(run_dir, model, dataset, 1) if path.suffix in ('.tsv', '.xlsx')]


def saved_predictions(plan: RunPlan) -> dict[tuple[str, str], int]:
    """{(model, dataset): predictions an earlier run of this work dir saved (the newest file of the kit's)}."""
    import pickle

    from vlmeval_ext.io import read_table
    out = {}
    for model in plan.models:
        for dataset in plan.datasets:
            best = 0
            for run_dir in kit_run_dirs(plan.model_dir(model)):
                for path in checkpoint_files(run_dir, model, dataset, 1):
                    try:
                        if path.suffix == '.pkl':
                            with open(path, 'rb') as f:
                                held = pickle.load(f)
                            n = len(held) if isinstance(held, dict) else 0
                        elif path.suffix in ('.tsv', '.xlsx'):
                            n = len(read_table(path))
                        else:
                            n = 0
                    except Exception:  # unreadable: counted as none (set_aside_unloadable says why)
                        n = 0
                    best = max(best, n)
            out[(model, dataset)] = best
    return out


# ---- one run per model x dataset -------------------------------------------------------------------------------
class WorkDirBusy(ExtError):
    """Another run holds a model x dataset of this run."""


@contextlib.contextmanager
def combination_locks(plan: RunPlan, first_rank: bool = True):
    """An exclusive lock per model x dataset (`<work dir>/.vlmeval-ext-locks/<model>__<dataset>.lock`), held for the
    whole run: a second run of the same combination stops at once (it would ask every call again); a run of other
    datasets in the same work dir goes on. Lock files are opened without following links."""
    if not first_rank:
        yield None
        return
    import fcntl

    from vlmeval_ext.io import safe_name
    folder = Path(plan.work_dir) / LOCK_DIR
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ExtError(f'work dir {plan.work_dir}: cannot be created or written ({type(err).__name__}: '
                       f'{err.strerror or err}); choose another --work-dir') from None
    held = []
    try:
        for model in plan.models:
            for dataset in plan.datasets:
                path = folder / f'{safe_name(model)}__{safe_name(dataset)}.lock'
                fd = open_lock_file(path, 'remove it or use another --work-dir')
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = os.pread(fd, 200, 0).decode('utf-8', 'replace').strip() or 'another process'
                    os.close(fd)
                    raise WorkDirBusy(f'{model} x {dataset} in work dir {plan.work_dir} is being run by another '
                                      f'run ({holder}); running both would make its model and judge calls twice. '
                                      'Wait for it, then run this command again (it continues from what was '
                                      'saved)') from None
                os.ftruncate(fd, 0)
                started = datetime.datetime.now().astimezone().strftime('%Y-%m-%d %H:%M:%S %Z')
                os.pwrite(fd, f'pid {os.getpid()}, started {started}\n'.encode(), 0)
                held.append(fd)
        yield folder
    finally:
        for fd in held:
            os.ftruncate(fd, 0)
            os.close(fd)


# ---- after the kit -----------------------------------------------------------------------------------------------
FAILED_SKIPS = ('invalid_dataset', 'No infer result found', 'Incomplete infer result')


@dataclass
class Outcome:
    model: str
    dataset: str
    run_dir: Path | None
    entry: dict | None

    @property
    def prediction_file(self) -> Path | None:
        rel = (self.entry or {}).get('prediction_file')
        if not rel or self.run_dir is None:
            return None
        path = Path(rel)
        if path.is_absolute():
            return path
        # the kit records it relative to where it ran (a relative --work-dir) or to the run folder
        for candidate in (Path.cwd() / path, self.run_dir / path, self.run_dir / path.name):
            if candidate.is_file():
                return candidate.resolve()
        return self.run_dir / path.name


def this_run_status(model_dir: Path, handed_args: list[str], started: datetime.datetime):
    """(run folder, status) the kit wrote for this run: its status.json whose argv is ours, created after start."""
    from vlmeval.smp.status_report import load_run_status
    found = None
    for run_dir in kit_run_dirs(model_dir):
        if (run_dir / 'status.json').is_symlink():
            continue
        status = load_run_status(str(run_dir))
        if list(status.get('argv') or [])[1:] != handed_args:
            continue
        try:
            created = datetime.datetime.fromisoformat(str(status.get('created_at')))
        except ValueError:
            continue
        if created.astimezone() >= started and (found is None or created > found[2]):
            found = (run_dir, status, created)
    return (found[0], found[1]) if found else (None, {})


def outcomes(plan: RunPlan, handed_args: list[str], started) -> list[Outcome]:
    result = []
    for model in plan.models:
        run_dir, status = this_run_status(plan.model_dir(model), handed_args, started)
        for dataset in plan.datasets:
            result.append(Outcome(model, dataset, run_dir, (status.get('datasets') or {}).get(dataset)))
    return result


def all_failed(pred: Path) -> tuple[int, int]:
    from vlmeval_ext.io import read_table
    from vlmeval_ext.predictions import is_kit_failure
    table = read_table(pred)
    if 'prediction' not in table.columns:
        return 0, 0
    values = list(table['prediction'])
    return len(values), sum(is_kit_failure(v) for v in values)


def score_files_of(pred: Path) -> list[Path]:
    """The score files an evaluation of `pred` wrote (official and efficient results sit side by side)."""
    from vlmeval_ext.io import stem_path
    from vlmeval_ext.registry import RESULT_TAGS
    return [p for p in (Path(stem_path(pred, f'{tag}_score.json')) for tag in ('', *RESULT_TAGS)) if p.is_file()]


def failure_of(outcome: Outcome, mode: str) -> str | None:
    """Why this combination failed, or None."""
    entry = outcome.entry
    if entry is None:
        return 'the kit recorded nothing for it (see the kit\'s log above)'
    message = entry.get('error_message') or entry.get('eval_error')
    if message:
        return ' '.join(str(message).split())[:1200]
    if entry.get('skip_reason') in FAILED_SKIPS:
        return f'not evaluated: {entry["skip_reason"]}'
    if entry.get('status') != 'done':
        return f'did not finish (the kit left it at status {entry.get("status")!r})'
    pred = outcome.prediction_file
    if pred is not None and pred.is_file():
        n, failed = all_failed(pred)
        if n and failed == n:
            return (f'all {n} predictions are the kit\'s inference failure text (the model answered nothing; '
                    f'see {pred.name}): nothing was scored')
    if mode != 'infer' and _ours(outcome.dataset):
        if pred is None or not pred.is_file():
            return f'its predictions file {pred} is not there: nothing was scored'
        if not score_files_of(pred):
            return f'no score file was written beside {pred.name}: it was not evaluated (see the log above)'
    return None


def after_the_kit(args, plan: RunPlan, handed_args: list[str], started, judge_kwargs: dict) -> int:
    from vlmeval_ext.records.run_records import write_run_records
    failures, scored = [], []
    world_size = int(os.environ.get('WORLD_SIZE', 1))
    remove_empty_run_dirs(plan.model_dirs(), started)
    for outcome in outcomes(plan, handed_args, started):
        reason = failure_of(outcome, args.mode)
        if reason:
            repaired = _ours(outcome.dataset) and repair_unstorable_replies(
                {outcome.model: plan.model_dir(outcome.model)}, [outcome.dataset], world_size)
            for line in repaired or []:
                say(line, 'WARNING')
            if repaired:
                reason += ('; the replies that could not be stored are repaired in the checkpoint: run the same '
                           'command again to finish (no reply is asked again)')
            failures.append(f'{outcome.model} x {outcome.dataset}: {reason}')
            continue
        pred = outcome.prediction_file
        if args.mode == 'infer' or pred is None or not pred.is_file() or not _ours(outcome.dataset):
            continue
        try:
            write_run_records(outcome.dataset, pred, judge_kwargs, model_name=outcome.model,
                              model_info=plan.served.get(outcome.model))
            scored.extend(score_files_of(pred))
        except ExtError as err:
            failures.append(f'{outcome.model} x {outcome.dataset}: run records not written: {err}')
    if scored:
        from vlmeval_ext.records.report_html import report_line
        from vlmeval_ext.records.summary import format_work_dir
        print('\n' + format_work_dir(scored))
        print(f'results: {plan.work_dir}')
        print(report_line(plan.work_dir))
    for line in failures:
        say(line, 'FAILED')
    return 1 if failures else 0


# ---- the whole run -----------------------------------------------------------------------------------------------
def _help_without_kit(entry: KitEntry) -> str | None:
    from vlmeval_ext.kit_workarounds.kit_help import help_text
    from vlmeval_ext.registry import MODELS, dataset_names
    try:
        source = Path(entry.source).read_text(encoding='utf-8')
    except OSError:
        return None
    return help_text(source, dataset_names(), list(MODELS), refused=KEY_HOMES)


def run(argv: list[str]) -> int:
    from vlmeval_ext.interrupt import EXIT_STATUS, STOP
    try:
        return _run(list(argv))
    except ExtError as err:
        return report(err)
    except KeyboardInterrupt:
        say(interrupted_line(), 'INTERRUPTED')
        return EXIT_STATUS
    finally:
        if STOP.reason == 'interrupted':
            STOP.clear()


def interrupted_line() -> str:
    from vlmeval_ext import run_context
    judges = run_context.current().judges
    made = sum(j.stats['made'] for j in judges)
    missing = sum(j.stats['refused'] for j in judges)
    verdicts = f'{made} judge verdict(s) received this run are stored, {missing} call(s) were not made; ' if (
        made or missing) else ''
    return (f'interrupted: {verdicts}the model answers the kit saved are kept; run the same command to resume '
            '(nothing stored is asked again)')


def _run(argv: list[str]) -> int:
    entry = find_kit_entry()
    if '-h' in argv or '--help' in argv:
        text = _help_without_kit(entry)
        if text is not None:
            print(text, end='')
            return 0
    # -- before the kit's import
    early = early_args(argv)
    config = read_config(early.config)
    refuse_secrets(argv, config)
    kit_judge_args, options = judge_options_of(early.judge_args)
    names = config_dataset_names(config, early.data)
    check_our_datasets(names)
    fmt, fmt_line = check_prediction_format(names, os.environ)
    from vlmeval_ext.judging import cache_dir
    from vlmeval_ext.registry import dataset_names
    known = known_dataset_names(dataset_names(), cache_dir(), kit_loaded=False) if not config else None
    if known is not None:                  # a name no one knows: said before the kit's import, as after it
        lines = unknown_dataset_lines(names, known)
        if lines:
            for line in lines:
                say(line, 'ERROR')
            return 2
    # -- the kit
    from vlmeval_ext.registry import register
    register(redact_logs=True, quiet_notices=True)
    kit_ns = entry.namespace()
    args = kit_args(kit_ns, entry, argv)
    # the kit's view of every value (its --key default is a placeholder: the command line was checked above)
    refuse_secrets([str(v) for k, v in vars(args).items() if isinstance(v, str) and k not in ('key', 'judge_key')])
    kit_judge_args, options = judge_options_of(args.judge_args)
    plan = plan_of(args, config)
    if not config:
        lines = unknown_dataset_lines(plan.datasets, known_dataset_names(dataset_names(), cache_dir(), kit_loaded=True))
        if lines:
            for line in lines:
                say(line, 'ERROR')
            return 2
    served = bool(getattr(args, 'base_url', None))
    lines = one_image_model_lines(plan, argv) + generative_on_retrieval_lines(plan, served)
    if lines:
        for line in lines:
            say(line, 'ERROR')
        return 2
    handed = with_option(argv, '--judge-args', json.dumps(kit_judge_args) if kit_judge_args else None)
    if rule_scored_run(args, plan.datasets):
        handed = with_option(handed, '--judge', 'exact_matching')   # else the kit names a judge no one asks
    if not getattr(args, 'reuse', False) and args.mode != 'eval':
        handed.append('--reuse')
    handed = serve_models(kit_ns, args, plan, handed)
    from vlmeval_ext import run_context
    from vlmeval_ext.judging import check_judge_options
    run_context.start(check_judge_options(options), {f: entry['served_name'] for f, entry in plan.served.items()})
    judge_kwargs = judge_kwargs_of(args, kit_judge_args)
    if args.mode != 'eval':
        for name, build in api_model_builders(plan).items():
            model_preflight(name, build, plan.served.get(name))
            typed = (plan.served.get(name) or {}).get('served_name') or name
            say(f'{typed} is an API model: the kit shows one progress bar per dataset while it answers '
                f'({", ".join(plan.datasets)}, in this order); each bar counts its answers')
    judge_preflight(args, judge_kwargs, plan.datasets)
    if args.judge and options.get('cache', True) and any(_ours(n) for n in plan.datasets):
        from vlmeval_ext.judging import shared_store
        shared_store()                       # a damaged or unwritable verdict cache: one line, before any call
    if fmt:
        os.environ[PRED_FORMAT] = fmt
    if fmt_line:
        say(fmt_line, 'INFO' if fmt else 'WARNING')
    world_size = int(os.environ.get('WORLD_SIZE', 1))
    first_rank = int(os.environ.get('RANK', 0)) == 0
    with combination_locks(plan, first_rank=first_rank):
        for line in [*set_aside_unloadable(plan.model_dirs(), plan.datasets, world_size),
                     *repair_unstorable_replies(plan.model_dirs(), [d for d in plan.datasets if _ours(d)],
                                                world_size)]:
            say(line, 'WARNING')
        before = saved_predictions(plan) if first_rank else {}
        if first_rank:
            from vlmeval_ext.kit_workarounds.verbatim import remember
            remember(prediction_files_of_ours(plan))
        if first_rank and any(before.values()):
            reused = ', '.join(f'{m} x {d}: {n}' for (m, d), n in before.items() if n)
            say(f'reusing what earlier runs in {plan.work_dir} saved (predictions: {reused}); verdicts come from the '
                'verdict cache; only what is missing is asked. Use another --work-dir to start afresh')
        started = datetime.datetime.now().astimezone()
        saved_argv = sys.argv
        sys.argv = [entry.target, *handed]
        from vlmeval_ext.interrupt import handling_ctrl_c, interrupted
        from vlmeval_ext.kit_workarounds.console import masked_console
        try:
            with masked_console(), handling_ctrl_c(interrupted_line):
                entry.run()
        finally:
            sys.argv = saved_argv
        if interrupted():
            raise KeyboardInterrupt
        if not first_rank:
            return 0
        if any(before.values()) or args.mode != 'eval':
            after = saved_predictions(plan)
            asked = {k: max(0, after.get(k, 0) - n) for k, n in before.items()}
            say('model calls this run: ' + ', '.join(f'{m} x {d}: {asked[(m, d)]} asked, {before[(m, d)]} reused'
                                                     for (m, d) in before))
        return after_the_kit(args, plan, handed, started, judge_kwargs)


def main() -> None:
    sys.exit(run(sys.argv[1:]))


if __name__ == '__main__':
    main()
