"""What one run hands to every evaluation it makes: built once by the launcher, read by the plugin's datasets and
the judge wrapper.

- `options`: the judge and protocol options of `--judge-args` (`judge_mode`, `cache`, `judge_retries`, ...), taken
  out before the kit sees them, so that the kit's own datasets never send them to their judges;
- `model_names`: the model names as the user typed them ('Qwen/Qwen2-VL-7B'), by the kit's folder name
  ('Qwen--Qwen2-VL-7B'), for what people read; the folder name stays in file names;
- `judges`: every judge wrapper made in the run (the end-of-run and Ctrl-C lines count their calls);
- `judges_checked`: the judges (name, endpoint, parameters) whose one test call answered: asked once per run;
- `notes_said`: the notes printed so far: a run says each once (every score file keeps its own);
- `replies_before_kit`: replies that look like missing values ('None', 'NA', ...) in our predictions files before
  the kit's rerun reads them back as 'nan', by file name (vlmeval_ext.kit_workarounds.verbatim).

Why one object the launcher sets instead of arguments: the kit builds the dataset objects and calls their
`evaluate` itself (run.py's loop), with only its own arguments; nothing of ours runs between the launcher and that
call, and this package does not patch the kit. So the run's state is this one object, replaced by `start` (the
launcher, before the kit runs) and read by `current`; nothing else in the package keeps run state in a module.
Kit-free.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RunContext:
    options: dict = field(default_factory=dict)
    model_names: dict = field(default_factory=dict)
    judges: list = field(default_factory=list)
    judges_checked: set = field(default_factory=set)
    notes_said: set = field(default_factory=set)
    replies_before_kit: dict = field(default_factory=dict)

    def typed_model(self, folder: str) -> str:
        """The name the user typed for the model whose kit folder is `folder` (the folder name when it is the
        same)."""
        return self.model_names.get(folder, folder)

    def say_once(self, line: str) -> None:
        if line not in self.notes_said:
            self.notes_said.add(line)
            print(line)


_CURRENT = RunContext()


def start(options: dict | None = None, model_names: dict | None = None) -> RunContext:
    """A new run's context (the options already checked: vlmeval_ext.judging.check_judge_options)."""
    global _CURRENT
    _CURRENT = RunContext(dict(options or {}), dict(model_names or {}))
    return _CURRENT


def current() -> RunContext:
    return _CURRENT
