"""`python run.py ...` / `vlmeval-ext run ...`: VLMEvalKit's own run.py, with our datasets registered.

Every kit flag works unchanged: the kit parses them. The launcher finds the kit's entry point itself (ms-vlmeval's
`vlmeval.run`, else the `run.py` of the installed upstream checkout, beside its `vlmeval` package; the
environment variable VLMEVALKIT_RUN_PY=/path/to/run.py overrides both), calls `vlmeval_ext.register()`, and adds
these steps around the kit's run, each at our boundary (nothing of the kit is changed):

before
- refuse arguments the kit would write into its status.json and logs: `--judge-key` / `--key` (keys belong in
  the environment) and credentials inside `--judge-base-url` / `--base-url` / `--judge-args`;
- an unknown --data name stops with the kit's message and our names (the kit would guess a "custom" dataset);
- an API model (`--base-url`, a kit API model name, a --config API class) and an API `--judge` for our datasets
  each get one test call; a dead endpoint stops the run before inference;
- one run per work dir: an exclusive lock on `<work dir>/.vlmeval-ext-run.lock` is held from here to the end; a
  second run on the same work dir stops at once with one line (it would make every call again);
- prediction checkpoints of the requested model x dataset combinations that the kit could not load (a run killed
  while the kit rewrote one in place) are moved aside, each with one line saying what was lost, so the run can
  finish;
- when every dataset of the run is ours and PRED_FORMAT (the kit's option) is not set, it is set to tsv, with one
  line: TSV keeps each reply verbatim, the kit's default xlsx does not (see `prediction_format`);
- replies in the checkpoints of our datasets that no UTF-8 file can hold (lone surrogates) are replaced by U+FFFD,
  with one line, so a run that failed on one finishes when run again (also said after a failed run);

during: what the kit prints goes through `core.secrets.redact` (a model answer echoing the key, printed with
`verbose`, shows `***`);

after (rank 0)
- read the kit's status.json of this run: a combination the kit recorded as failed, one whose predictions all
  failed, or one the kit recorded nothing for exits 1 with one line each (the kit logs them and exits 0);
- write the run records (manifest, paper comparison) of each of our datasets (vlmeval_ext.reporting).

Errors of set-up (ExtError) print one line and exit 2.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import json
import os
import re
import runpy
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from vlmeval_ext.errors import EndpointUnavailable, ExtError, KitEntryPointNotFound, RefusedArgument, report

PREFIX = '[vlmeval-ext]'
RUN_PY_OVERRIDE = 'VLMEVALKIT_RUN_PY'
PROBE_PROMPT = 'Connection test: reply with OK.'


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


def find_kit_entry() -> KitEntry:
    """ms-vlmeval's `vlmeval.run`, else the upstream checkout's `run.py` beside the installed `vlmeval` package
    (an editable install), else VLMEVALKIT_RUN_PY when set (it overrides both)."""
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
        f"`pip install -e /path/to/VLMEvalKit` or `pip install 'vlmeval-ext[ms]'`, or set "
        f'{RUN_PY_OVERRIDE}=/path/to/VLMEvalKit/run.py')


# ---- reading the command line the way the kit will -------------------------------------------------------------
# The options we read, as the kit declares them; every other option of the kit is declared loosely (nargs='?') so
# abbreviations resolve exactly as in the kit's parser (argparse's allow_abbrev, the kit's default).
_OPTIONS = {
    '--data': dict(nargs='+', default=[]), '--model': dict(nargs='+', default=[]), '--config': {},
    '--work-dir': dict(default='./outputs'), '--mode': dict(default='all'),
    '--judge': {}, '--judge-args': {}, '--judge-base-url': {}, '--judge-key': {}, '--key': {},
    '--base-url': {}, '--api-mode': dict(action='store_true'), '--keep-failed': dict(action='store_true'),
    '--timeout': dict(type=int, default=None),
}
# Used when the kit's run.py cannot be read: the options both kits declare.
_KIT_OPTIONS_FALLBACK = (
    '--data', '--model', '--config', '--work-dir', '--mode', '--api-nproc', '--retry', '--verbose', '--keep-failed',
    '--ignore', '--reuse', '--reuse-aux', '--use-vllm', '--use-verifier', '--judge', '--judge-args',
    '--judge-base-url', '--judge-key', '--judge-api-nproc', '--judge-retry', '--judge-timeout', '--base-url',
    '--key', '--thinker', '--max-tokens', '--temperature', '--top-k', '--top-p', '--repetition-penalty',
    '--timeout', '--custom-prompt', '--extra-body', '--video-llm', '--local-media', '--api-mode',
    '--monitor-interval', '--debug')
_ADD_ARGUMENT = re.compile(r"""add_argument\(\s*['"](--[A-Za-z0-9][\w-]*)['"]""")


def kit_option_names(entry: KitEntry | None) -> tuple[str, ...]:
    """The long option names the kit's parser declares (read from its run.py)."""
    if entry is not None:
        try:
            names = tuple(dict.fromkeys(_ADD_ARGUMENT.findall(Path(entry.source).read_text(encoding='utf-8'))))
        except OSError:
            names = ()
        if '--data' in names and '--judge-key' in names:
            return names
    return _KIT_OPTIONS_FALLBACK


class _ParseError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise _ParseError(message)


def parse_kit_args(argv, option_names=_KIT_OPTIONS_FALLBACK) -> argparse.Namespace:
    """The kit's arguments we act on, parsed as the kit's parser would (same option names, abbreviations)."""
    parser = _Parser(add_help=False, allow_abbrev=True)
    for name in dict.fromkeys((*option_names, *_OPTIONS)):
        if name in _OPTIONS:
            parser.add_argument(name, **_OPTIONS[name])
        elif name not in ('-h', '--help'):
            parser.add_argument(name, nargs='?')
    try:
        args, _ = parser.parse_known_args(list(argv))
    except _ParseError as err:
        raise RefusedArgument(f'run.py: {err}') from None
    return args


KEY_HOMES = {
    'judge_key': ('--judge-key', 'OPENAI_API_KEY (the kit\'s judges read it from the environment)'),
    'key': ('--key', 'LMDEPLOY_API_KEY (the kit\'s --base-url model reads it from the environment)'),
}


def refuse_secrets(args: argparse.Namespace) -> None:
    """Keys never reach the kit's argv: it stores argv in status.json and logs its judge arguments."""
    for dest, (flag, home) in KEY_HOMES.items():
        if getattr(args, dest, None) is not None:
            raise RefusedArgument(f'{flag} would be written into the kit\'s status.json and logs; put the key in '
                                  f'{home} instead')
    for flag, url in (('--judge-base-url', args.judge_base_url), ('--base-url', args.base_url)):
        if url and (urlparse(url).username or urlparse(url).password):
            raise RefusedArgument(f'{flag} holds credentials (user:password@host), which the kit would write into '
                                  'its status.json and logs; give the URL without them and the key in '
                                  'OPENAI_API_KEY')
    if args.judge_args:
        try:
            judge_args = json.loads(args.judge_args)
        except ValueError as err:
            raise RefusedArgument(f'--judge-args is not valid JSON ({err})') from None
        if not isinstance(judge_args, dict):
            raise RefusedArgument('--judge-args must be a JSON object')
        secret = [k for k in judge_args if re.search(r'key|token|secret|password', str(k), re.I)]
        if secret:
            raise RefusedArgument(f'--judge-args holds {secret}, which the kit would write into its status.json '
                                  'and logs; put the key in OPENAI_API_KEY instead')


# ---- what the run covers ---------------------------------------------------------------------------------------
@dataclass
class RunPlan:
    models: list[str]
    datasets: list[str]
    work_dir: str
    config: dict = field(default_factory=dict)

    def model_dir(self, model: str) -> Path:
        return Path(self.work_dir) / model


def plan_of(args: argparse.Namespace) -> RunPlan:
    config = {}
    if args.config:
        try:
            config = json.loads(Path(args.config).read_text(encoding='utf-8'))
        except (OSError, ValueError) as err:
            raise ExtError(f'--config {args.config}: cannot be read as JSON ({err})') from None
        models, datasets = list(config.get('model', {})), list(config.get('data', {}))
    else:
        models, datasets = list(args.model or []), list(args.data or [])
    if args.api_mode:
        models = [m.replace('/', '--') for m in models]     # the kit's folder name in API mode
        work_dir = args.work_dir
    else:
        work_dir = os.environ.get('MMEVAL_ROOT', args.work_dir)
    return RunPlan(models, datasets, work_dir, config)


def check_dataset_names(names) -> list[str]:
    """Names neither the kit nor we know and with no TSV under $LMUData: the errors to print."""
    import vlmeval.dataset as kit
    from vlmeval.dataset.video_dataset_config import supported_video_datasets

    from vlmeval_ext.core.io import lmu_data_root
    from vlmeval_ext.registry import our_dataset_names
    errors = []
    for name in names:
        if name in kit.SUPPORTED_DATASETS or name in supported_video_datasets:
            continue
        if os.path.exists(os.path.join(lmu_data_root(), f'{name}.tsv')):
            continue  # the kit's custom-dataset path: a user TSV under $LMUData
        errors.append(f'Dataset {name} is not officially supported and {lmu_data_root()}/{name}.tsv does not '
                      f'exist (the kit would skip it). vlmeval-ext datasets: {", ".join(our_dataset_names())}')
    return errors


def _ours(name: str) -> bool:
    from vlmeval_ext.registry import class_for_dataset
    return name.endswith('-RC') or class_for_dataset(name) is not None


def _config_dataset_names(plan: RunPlan) -> list[str]:
    names = []
    for key, entry in plan.config.get('data', {}).items():
        names.append(entry.get('dataset', key) if isinstance(entry, dict) else key)
    return names or plan.datasets


# ---- how the kit stores predictions -----------------------------------------------------------------------------
PRED_FORMAT = 'PRED_FORMAT'     # the kit's documented option (vlmeval.smp.file.get_pred_file_format): xlsx by default


def prediction_format(dataset_names, environ) -> tuple[str | None, str | None]:
    """(value to give the kit's PRED_FORMAT or None, the line to say) for a run of these datasets.

    Our datasets are scored from the model's exact text, which the kit's default xlsx does not keep: a cell holds
    at most 32,767 characters (longer replies are cut), ms-vlmeval writes a reply starting with '=' as a live
    formula, control characters become `_x0000_` escapes. TSV keeps text verbatim. When every dataset of the run is
    ours and PRED_FORMAT is not set, the run writes TSV; otherwise the user's choice stands and we say what xlsx
    costs (our reading refuses a reply cut at the cell limit and reads formulas as their text)."""
    names = list(dataset_names)
    ours = [n for n in names if _ours(n)]
    if not ours:
        return None, None
    chosen = environ.get(PRED_FORMAT, '').strip().lower()
    if chosen == '' and len(ours) == len(names):
        return 'tsv', (f'{PRED_FORMAT}=tsv: the kit writes the predictions as TSV, which keeps each reply '
                       'verbatim (its default xlsx cuts replies at 32,767 characters and can store a reply as a '
                       f'formula); set {PRED_FORMAT}=xlsx to override')
    if chosen in ('', 'xlsx'):
        why = 'the kit\'s default' if chosen == '' else f'{PRED_FORMAT}=xlsx'
        return None, (f'predictions of {", ".join(ours)} are written as xlsx ({why}): a reply longer than 32,767 '
                      'characters is cut by the spreadsheet and its evaluation stops with a line naming the rows; '
                      f'{PRED_FORMAT}=tsv keeps every reply verbatim')
    return None, None


# ---- endpoint checks -------------------------------------------------------------------------------------------
def judge_preflight(args: argparse.Namespace, plan: RunPlan) -> bool:
    """With an API --judge for one of our datasets, one tiny call before inference (the kit would find a dead
    judge hours later). True when the judge answered; raises JudgeUnavailable when it did not."""
    from vlmeval_ext.core.judging import OFFLINE_JUDGES, kit_judge_caller
    if not args.judge or args.judge in OFFLINE_JUDGES or args.judge == 'exact_matching' or args.mode == 'infer':
        return False
    if not any(_ours(name) for name in _config_dataset_names(plan)):
        return False
    from vlmeval_ext.core.judge import preflight
    kwargs = {'timeout': 60}
    if args.judge_base_url:
        kwargs['api_base'] = f"{args.judge_base_url.rstrip('/')}/chat/completions"
    call, _ = kit_judge_caller(args.judge, **kwargs)
    preflight(call)
    return True


def with_judge_args(argv: list[str], extra: dict, option_names) -> list[str]:
    """argv with `extra` merged into its --judge-args: how a fact reaches our evaluate, which the kit calls with
    the judge arguments of the command line. Appended: the kit's parser keeps the last --judge-args given."""
    args = parse_kit_args(argv, option_names)
    merged = {**(json.loads(args.judge_args) if args.judge_args else {}), **extra}
    return [*argv, '--judge-args', json.dumps(merged)]


def api_model_builders(args: argparse.Namespace, plan: RunPlan) -> dict:
    """{model name: zero-argument builder} for the API models of the run (built as the kit builds them)."""
    import vlmeval.api as kit_api
    from vlmeval.api.base import BaseAPI
    from vlmeval.config import supported_VLM
    builders = {}
    if args.base_url and not args.config:
        from functools import partial
        for name in args.model or []:            # as given: the served model's name (folders replace '/')
            kwargs = {'model': name, 'api_base': f"{args.base_url.rstrip('/')}/chat/completions"}
            if args.timeout:
                kwargs['timeout'] = args.timeout
            builders[name] = partial(kit_api.LMDeployAPI, **kwargs)
        return builders
    for name in plan.models:
        entry = plan.config.get('model', {}).get(name) if args.config else None
        if isinstance(entry, dict) and 'class' in entry:
            cls = getattr(kit_api, entry['class'], None)
            if isinstance(cls, type) and issubclass(cls, BaseAPI):
                kwargs = {k: v for k, v in entry.items() if k != 'class'}
                builders[name] = lambda cls=cls, kwargs=kwargs: cls(**kwargs)
            continue
        factory = supported_VLM.get(name)
        func = getattr(factory, 'func', factory)
        if isinstance(func, type) and issubclass(func, BaseAPI):
            kwargs = dict(entry) if isinstance(entry, dict) else {}
            builders[name] = lambda factory=factory, kwargs=kwargs: factory(**kwargs)
    return builders


def model_preflight(name: str, build) -> None:
    """One test call to an API model through the kit's own client; raises EndpointUnavailable."""
    from vlmeval_ext.core.predictions import is_kit_failure
    try:
        model = build()
    except Exception as err:  # the kit's API classes raise anything from their constructors (e.g. no server)
        raise EndpointUnavailable(f'API model {name} could not be built ({type(err).__name__}: {err}); check '
                                  '--base-url or the api_base of --config and the model key') from err
    model.retry, model.wait = 2, 1          # our own probe instance; the run builds its own
    answer = model.generate(message=[{'type': 'text', 'value': PROBE_PROMPT}])
    if isinstance(answer, dict):
        answer = answer.get('prediction')
    fail_msg = getattr(model, 'fail_msg', None)
    if not isinstance(answer, str) or not answer.strip() or is_kit_failure(answer) \
            or (fail_msg and fail_msg.strip() in answer):
        where = urlparse(str(getattr(model, 'api_base', '') or '')).netloc or 'its endpoint'
        raise EndpointUnavailable(f'API model {name} did not answer a test call at {where} (reply: '
                                  f'{str(answer)[:80]!r}); check that the server is up, --base-url or the api_base '
                                  'of --config, and the model key. Nothing was run')


# ---- the kit's checkpoints -------------------------------------------------------------------------------------
def checkpoint_files(run_dir: Path, model: str, dataset: str, world_size: int) -> list[Path]:
    """The files the kit reads back for one model x dataset in one of its run folders (inference.py's names)."""
    names = [f'{model}_{dataset}_checkpoint.pkl', f'{model}_{dataset}_PREV.pkl',
             *(f'{rank}{world_size}_{dataset}.pkl' for rank in range(world_size)),
             *(f'{model}_{dataset}.{ext}' for ext in ('xlsx', 'tsv', 'json'))]
    return [run_dir / n for n in names if (run_dir / n).is_file()]


def kit_run_dirs(model_dir: Path) -> list[Path]:
    """The model folder and the kit's per-run folders inside it (an upstream checkout writes one per run)."""
    from vlmeval.smp.file import list_eval_run_dirs
    return [model_dir, *map(Path, list_eval_run_dirs(str(model_dir)))] if model_dir.is_dir() else []


def set_aside_unloadable(plan: RunPlan, world_size: int) -> list[str]:
    """Move aside each checkpoint/prediction file of the run that the kit could not load; returns the lines said."""
    from vlmeval.smp import load
    said = []
    stamp = datetime.datetime.now().strftime('%Y%m%d-%H%M%S')
    for model in plan.models:
        for run_dir in kit_run_dirs(plan.model_dir(model)):
            for dataset in plan.datasets:
                for path in checkpoint_files(run_dir, model, dataset, world_size):
                    try:
                        load(str(path))
                        continue
                    except Exception as err:  # pickle/zip/json raise many types; any of them stops the kit
                        reason = f'{type(err).__name__}: {err}'
                    aside = path.with_name(f'{path.name}.unreadable-{stamp}')
                    try:
                        os.replace(path, aside)
                    except FileNotFoundError:
                        continue           # another rank moved it first
                    line = (f'{path} cannot be loaded ({reason[:120]}); moved to {aside.name}. Lost: the '
                            f'{model} x {dataset} predictions it held; the kit asks for them again')
                    say(line, 'WARNING')
                    said.append(line)
    return said


def repair_unstorable_replies(plan: RunPlan, world_size: int, datasets=None) -> list[str]:
    """Replace lone surrogates in the replies held by the checkpoints of our datasets (U+FFFD; a surrogate pair
    split in two code points is joined); returns the lines said.

    A model may send a lone surrogate ('\\ud83d', half an emoji); Python keeps it, but no UTF-8 file can: the kit's
    table of predictions (pandas with Arrow strings) refuses it, the combination fails, and every rerun fails the
    same way with 0 requests, because the checkpoint holds the same reply. Repaired here, the rerun finishes."""
    import pickle

    from vlmeval_ext.core.predictions import storable_text
    said = []
    for model in plan.models:
        for run_dir in kit_run_dirs(plan.model_dir(model)):
            for dataset in datasets or plan.datasets:
                if not _ours(dataset):
                    continue
                for path in checkpoint_files(run_dir, model, dataset, world_size):
                    if path.suffix != '.pkl':
                        continue
                    try:
                        with open(path, 'rb') as f:
                            held = pickle.load(f)      # the kit's own checkpoint, written by its dump()
                    except Exception:  # unreadable: set_aside_unloadable deals with it
                        continue
                    if not isinstance(held, dict):
                        continue
                    fixed = [k for k, v in held.items() if isinstance(v, str) and storable_text(v) != v]
                    if not fixed:
                        continue
                    for k in fixed:
                        held[k] = storable_text(held[k])
                    tmp = path.with_name(f'{path.name}.partial{os.getpid()}')
                    with open(tmp, 'wb') as f:
                        pickle.dump(held, f)
                    os.replace(tmp, path)
                    line = (f'{path}: {len(fixed)} repl(ies) of {model} on {dataset} (item(s) {fixed[:10]}) held a '
                            'lone surrogate, which no UTF-8 file can store; replaced by U+FFFD so the '
                            'predictions can be written')
                    say(line, 'WARNING')
                    said.append(line)
    return said


# ---- one run per work dir --------------------------------------------------------------------------------------
LOCK_NAME = '.vlmeval-ext-run.lock'


class WorkDirBusy(ExtError):
    """Another run holds the work dir: two runs would ask the same predictions and verdicts twice."""


@contextlib.contextmanager
def work_dir_lock(work_dir: str, first_rank: bool = True):
    """Hold an exclusive lock on `<work dir>/.vlmeval-ext-run.lock` for the whole run (the kit's checkpoints and
    predictions live there). A second run on the same work dir stops at once with one line (WorkDirBusy) instead
    of making every call again. Ranks after the first of a torchrun share their run's lock."""
    if not first_rank:
        yield None
        return
    import fcntl
    os.makedirs(work_dir, exist_ok=True)
    path = Path(work_dir) / LOCK_NAME
    with open(path, 'a+') as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or 'another process'
            raise WorkDirBusy(f'work dir {work_dir} is in use by another run ({holder}); running both would make '
                              'every model and judge call twice. Wait for it to finish and run this command again '
                              '(--reuse continues from what it saved), or use another --work-dir') from None
        lock.seek(0)
        lock.truncate()
        lock.write(f'pid {os.getpid()}, started {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M:%S %Z}\n')
        lock.flush()
        try:
            yield path
        finally:
            lock.seek(0)
            lock.truncate()


# ---- after the kit -----------------------------------------------------------------------------------------------
# Reasons the kit records for a combination it did not evaluate that mean nothing was evaluated by mistake.
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
        return path if path.is_absolute() else self.run_dir / path


def this_run_status(model_dir: Path, handed_args: list[str], started: datetime.datetime):
    """(run folder, status) the kit wrote for this run: its status.json whose argv is ours, created after start."""
    from vlmeval.smp.status_report import load_run_status
    found = None
    for run_dir in kit_run_dirs(model_dir):
        if (run_dir / 'status.json').is_symlink():
            continue                # an upstream checkout links the latest run's status.json into the model folder
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


def failure_of(outcome: Outcome) -> str | None:
    """Why this combination failed, or None."""
    entry = outcome.entry
    if entry is None:
        return 'the kit recorded nothing for it (see the kit\'s log above)'
    message = entry.get('error_message') or entry.get('eval_error')
    if message:
        return str(message)
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
    return None


def all_failed(pred: Path) -> tuple[int, int]:
    """(rows, rows whose prediction is the kit's failure text) of a predictions file."""
    from vlmeval_ext.core.io import read_table
    from vlmeval_ext.core.predictions import is_kit_failure
    table = read_table(pred)
    if 'prediction' not in table.columns:
        return 0, 0
    values = list(table['prediction'])
    return len(values), sum(is_kit_failure(v) for v in values)


def judge_kwargs_of(args: argparse.Namespace) -> dict:
    kwargs = dict(json.loads(args.judge_args)) if args.judge_args else {}
    if args.judge:
        kwargs['model'] = args.judge
    if args.judge_base_url:
        kwargs['api_base'] = f"{args.judge_base_url.rstrip('/')}/chat/completions"
    return kwargs


def after_the_kit(args, plan: RunPlan, handed_args: list[str], started) -> int:
    failures = []
    world_size = int(os.environ.get('WORLD_SIZE', 1))
    for outcome in outcomes(plan, handed_args, started):
        reason = failure_of(outcome)
        if reason:
            single = RunPlan([outcome.model], [outcome.dataset], plan.work_dir, plan.config)
            if _ours(outcome.dataset) and repair_unstorable_replies(single, world_size):
                reason += ('; the replies that could not be stored are repaired in the checkpoint: run the same '
                           'command again to finish (no reply is asked again)')
            failures.append(f'{outcome.model} x {outcome.dataset}: {reason}')
            continue
        pred = outcome.prediction_file
        if args.mode == 'infer' or pred is None or not pred.is_file() or not _ours(outcome.dataset):
            continue
        from vlmeval_ext.reporting import write_run_records
        try:
            write_run_records(outcome.dataset, pred, judge_kwargs_of(args), model_name=outcome.model)
        except ExtError as err:
            failures.append(f'{outcome.model} x {outcome.dataset}: run records not written: {err}')
    for line in failures:
        say(line, 'FAILED')
    return 1 if failures else 0


# ---- the whole run -----------------------------------------------------------------------------------------------
def _help_without_kit(entry: KitEntry) -> str | None:
    """The kit's --help read from its run.py (no kit import), with our datasets and models; None if unreadable."""
    from vlmeval_ext.kit_help import help_text
    from vlmeval_ext.registry import MODEL_FACTORIES, dataset_names
    try:
        source = Path(entry.source).read_text(encoding='utf-8')
    except OSError:
        return None
    return help_text(source, dataset_names(), list(MODEL_FACTORIES))


def run(argv: list[str]) -> int:
    try:
        return _run(list(argv))
    except ExtError as err:
        return report(err)


def _run(argv: list[str]) -> int:
    entry = find_kit_entry()
    if '-h' in argv or '--help' in argv:
        text = _help_without_kit(entry)
        if text is not None:
            print(text, end='')
            return 0
    option_names = kit_option_names(entry)
    args = parse_kit_args(argv, option_names)
    refuse_secrets(args)
    from vlmeval_ext.registry import register
    register()
    plan = plan_of(args)
    if args.data and not args.config:
        errors = check_dataset_names(args.data)
        if errors:
            for e in errors:
                say(e, 'ERROR')
            return 2
    if args.mode != 'eval':
        for name, build in api_model_builders(args, plan).items():
            model_preflight(name, build)
    handed = list(argv)
    if judge_preflight(args, plan) and all(_ours(n) and not n.endswith('-RC') for n in _config_dataset_names(plan)):
        # Checked once for the whole run: our evaluate need not ask again. Only when every dataset is ours: the
        # kit hands every --judge-args key to its own judges, which send unknown keys in the request body.
        handed = with_judge_args(handed, {'preflight': False}, option_names)
    fmt, line = prediction_format(_config_dataset_names(plan), os.environ)
    if fmt:
        os.environ[PRED_FORMAT] = fmt       # the kit's own option, set for this run and said on the console
    if line:
        say(line, 'INFO' if fmt else 'WARNING')
    world_size = int(os.environ.get('WORLD_SIZE', 1))
    with work_dir_lock(plan.work_dir, first_rank=int(os.environ.get('RANK', 0)) == 0):
        set_aside_unloadable(plan, world_size)
        repair_unstorable_replies(plan, world_size)
        started = datetime.datetime.now().astimezone()
        saved_argv = sys.argv
        sys.argv = [entry.target, *handed]
        from vlmeval_ext.core.secrets import masked_console
        try:
            with masked_console():   # configured keys never reach the console (the kit prints answers with verbose)
                entry.run()
        finally:
            sys.argv = saved_argv
        if int(os.environ.get('RANK', 0)) != 0:
            return 0
        return after_the_kit(args, plan, handed, started)


def main() -> None:
    sys.exit(run(sys.argv[1:]))


if __name__ == '__main__':
    main()
