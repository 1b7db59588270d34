"""The training loop: setup (validate → data → model → init → optimizer → restore) and train_and_evaluate.

`setup(config, workdir)` validates every config subtree before any compute, builds the data, the model (the
ConfigDict becomes a frozen `ModelConfig` here), the initial parameters (`init.init_params`), the optimizer (with
µP learning-rate multipliers) and the train state, and restores the latest checkpoint of `workdir` if there is one
(params, optimizer state, step, model state and the data iterator's position), so rerunning a workdir resumes;
it returns a `train.experiment.Experiment`. How a run stops short (exceptions, signals in setup): train/stops.py.

`train_and_evaluate(experiment)` runs the jitted, data-parallel step until `train.num_steps`, logging to
`metrics.jsonl`, TensorBoard and the trackers of `metrics.writers` (train/trackers.py), evaluating every `train.eval_every` steps (loss, token accuracy, perplexity;
greedy-decoding BLEU and exact match for translation, train/evaluation.py; at `TrainState.eval_variables()`, schedule-free's x) and checkpointing every `train.checkpoint_every` steps and
at the end. A non-finite loss or gradient stops the run: `status.json` says `diverged` with the step and the
parameters whose gradients were non-finite, the last good checkpoint stays, and `stops.Diverged` is raised for main.py
to turn into a non-zero exit code. Step hooks (`StepHook`: a measurement every k steps that the layers above build,
e.g. the curvature record of `train.curvature_every`, experiments/hooks.py) run on the state after the step and their
scalars go into that step's train record. A preemption (SIGTERM, or orbax's preemption sync point with jax.distributed;
`train.preemption.PreemptionNotice`) finishes the current step, checkpoints it (forced), writes `status.json` =
`preempted` with the step and raises `stops.Preempted`; rerunning the workdir resumes from that step bit for bit.
With `train.eval_at_init`, a run that starts at step 0 is evaluated before its first update (an eval record at
step 0: the loss at init) and writes `data_stats.json` (the eval targets' unigram entropy): the two references
analysis/outcomes.py classifies a run against (diverged / collapsed / trained).
"""

import contextlib
import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Optional

import jax
import jax.numpy as jnp
from absl import logging
from etils import epath

import init as init_lib
import models
from train import checkpoint as checkpoint_lib
from train import config as config_lib
from train import data as data_lib
from train import decode as decode_lib
from train import evaluation, programs, stops
from train import metrics as metrics_lib
from train import preemption as preemption_lib
from train import qk_clip as qk_clip_lib
from train import step as step_lib
from train import trackers as trackers_lib
from train.experiment import Experiment, first_global_batch
from train.state import TrainState

DATA_STATS_FILE = "data_stats.json"


@dataclasses.dataclass(frozen=True)
class StepHook:
  """A measurement taken inside `train_and_evaluate` every `every` steps (the layers above `train/` build it).

  `fn(step, state, batch) -> {name: scalar}` runs after update `step` on the finite state it produced (`batch` is
  the global batch of that update); its scalars join the step's train record in metrics.jsonl and TensorBoard, so a
  step has one record whatever the hooks, and a resumed run drops and recomputes the records after its checkpoint
  like every other. It must not change the state (training is the same with or without it).
  """

  every: int
  fn: Callable[[int, TrainState, dict], Mapping[str, Any]]

  def __post_init__(self):
    if not isinstance(self.every, int) or isinstance(self.every, bool) or self.every < 1:
      raise ValueError(f"StepHook.every={self.every!r} is invalid; valid: an integer >= 1")


def setup(config: Any, workdir: str, *, restore_step: Optional[int] = None) -> Experiment:
  """Builds everything `train_and_evaluate` and the analyses need.

  Args:
    config: the whole experiment config: a ConfigDict (resolved here) or a resolved `train.config.Config`.
    workdir: the run's directory.
    restore_step: checkpoint to restore: None = the latest (a rerun resumes), 0 = none (the model at init),
      k > 0 = that step (ValueError if it is not in the workdir).
  """
  config = config_lib.resolve(config, process_count=jax.process_count())
  mesh = step_lib.make_mesh(fsdp=config.mesh.fsdp)  # checks that mesh.fsdp divides the device count
  epath.Path(workdir).mkdir(parents=True, exist_ok=True)
  data = data_lib.build(config.data, workdir=workdir)
  model_config = dataclasses.replace(config.model, vocab_size=data.tokenizer.vocab_size)
  if model_config.arch == "encoder_decoder" and data.task != "translation":
    raise ValueError(
        f"model.arch='encoder_decoder' needs a translation dataset; data.name={config.data.name!r} "
        f"is a {data.task!r} dataset (use model.arch='decoder' or 'encoder')"
    )
  model = models.get_model(model_config)

  rng = jax.random.key(config.train.seed)
  first = first_global_batch(data)
  variables = init_lib.init_params(config.init, model, jax.random.fold_in(rng, 0), first)
  params = variables.pop("params")
  # One optimizer object per (optim, model, horizon) in a process, so a second run reuses its jitted step (programs).
  tx, schedule = programs.optimizer(config.optim, model_config, params, config.train.num_steps)
  state = TrainState(
      step=jnp.asarray(0, jnp.int32),
      params=params,
      opt_state=tx.init(params),
      variables=variables,
      rng=jax.random.fold_in(rng, 1),
  )
  # Several processes: jax.device_put refuses a typed PRNG key for devices of other processes (the pinned jax), so
  # the key goes as its key data and is wrapped again on the mesh.
  impl = jax.random.key_impl(state.rng)
  shardings = step_lib.state_shardings(state, mesh, models.logical_axes(model), config.mesh.rules)
  state = jax.device_put(state.replace(rng=jax.random.key_data(state.rng)), shardings)
  state = state.replace(rng=jax.random.wrap_key_data(state.rng, impl=impl))

  checkpointer = checkpoint_lib.Checkpointer(
      epath.Path(workdir) / "checkpoints",
      max_to_keep=config.train.keep_checkpoints,
      save_every=config.train.checkpoint_every,
  )
  if restore_step and restore_step not in checkpointer.all_steps():
    raise ValueError(
        f"checkpoint step {restore_step} is not in {workdir}/checkpoints; it has " f"{checkpointer.all_steps()}"
    )
  restored = None if restore_step == 0 else checkpointer.restore(state, step=restore_step)
  data_state, start = None, 0
  if restored is not None:
    state, data_state = restored
    start = int(state.step)
    logging.info("Resumed %s from step %d", workdir, start)
  return Experiment(config, workdir, data, model, mesh, state, tx, schedule, checkpointer, data_state, start)


def _nonfinite_paths(grad_finite, names) -> list[str]:
  return [n for n, ok in zip(names, jax.tree.leaves(grad_finite)) if not bool(ok)]


def train_and_evaluate(exp: Experiment, hooks: Sequence[StepHook] = ()) -> TrainState:
  """Trains from `exp.start_step` to `train.num_steps`; returns the final state (raises Diverged on NaN/Inf,
  Preempted after checkpointing on a preemption notice, Interrupted on a first Ctrl-C, WriteFailed when a file
  could not be written). SIGTERM's and SIGINT's
  previous handlers are back when it returns.

  Args:
    exp: from `setup`.
    hooks: measurements every k steps (`StepHook`), logged with the step's train metrics.
  """
  hooks = tuple(hooks)
  for hook in hooks:
    if not isinstance(hook, StepHook):
      raise TypeError(f"hooks must be train.loop.StepHook instances, got {type(hook).__name__}")
  at = {"step": exp.start_step}  # the step the loop is at, for a failure's status
  with preemption_lib.PreemptionNotice(exp.checkpointer) as preemption:
    try:
      return _train_and_evaluate(exp, preemption, hooks, at)
    except KeyboardInterrupt:  # the second Ctrl-C (preemption.PreemptionNotice): a true status, then stop
      last = exp.checkpointer.latest_step()
      with contextlib.suppress(OSError):
        metrics_lib.write_status(exp.workdir, "interrupted", at["step"], reason="a second Ctrl-C", last_checkpoint=last)
      raise stops.Aborted(at["step"], last) from None
    except OSError as e:  # a write that failed (a CheckpointWriteError names the checkpoint and the last good one)
      step = getattr(e, "step", None) or at["step"]
      last_good = getattr(e, "last_good", None)
      reason = str(e) if isinstance(e, checkpoint_lib.CheckpointWriteError) else checkpoint_lib.write_failure_reason(e)
      try:  # on a full disk status.json is rewritten over its own block (train/metrics.py); else the error below
        metrics_lib.write_status(exp.workdir, "failed", step, reason=reason, last_checkpoint=last_good)
      except OSError as status_error:
        logging.error("status.json could not be written either: %s", checkpoint_lib.write_failure_reason(status_error))
      raise stops.WriteFailed(step, e) from None
    finally:  # a run that stops early (diverged, crashed, preempted, a failed write) still finishes its trackers
      if "writer" in at:
        with contextlib.suppress(OSError):  # a full disk: the error being raised says so already
          at["writer"].close()


def _train_and_evaluate(
    exp: Experiment, preemption: preemption_lib.PreemptionNotice, hooks: tuple[StepHook, ...], at: dict
) -> TrainState:
  cfg = exp.config.train
  workdir = exp.workdir
  if jax.process_index() == 0:  # one writer; every process logs
    metrics_lib.write_text_atomic(epath.Path(workdir) / "config.json", json.dumps(exp.config.to_dict(), indent=2))
  metrics = exp.config.metrics if "metrics" in exp.config else None  # a config.json may predate the group
  metrics = metrics or trackers_lib.default_metrics_config()
  writer = metrics_lib.MetricWriter(  # writes on process 0 only
      workdir,
      resume_step=exp.start_step,
      tensorboard="tensorboard" in metrics.writers,
      trackers=trackers_lib.open_trackers(metrics, workdir, exp.config.to_dict()),
  )
  at["writer"] = writer  # closed (its trackers finished) however the loop ends
  progress = metrics_lib.ProgressReporter(max(cfg.num_steps, 1))  # num_steps 0 (init only) reports nothing
  # Built once per program in this process (train.programs): a rerun of the same program traces nothing again.
  train_step, eval_step = programs.train_step(exp), programs.eval_step(exp)
  decode_fn = None
  if exp.model.config.arch == "encoder_decoder" and cfg.num_decode_examples > 0:
    decode_fn = decode_lib.make_greedy_decode(exp.model, cfg.decode_max_length or exp.data.max_target_length)
  names = step_lib.leaf_names(exp.state.params)

  it = exp.data.train_iter()
  if exp.data_state is not None:
    it.set_state(exp.data_state)
  state, step = exp.state, exp.start_step
  last_eval = None
  metrics_lib.write_status(workdir, "running", step, total_steps=cfg.num_steps)
  if cfg.eval_at_init and step == 0 and cfg.num_steps > 0:
    # The loss at init and the targets' unigram entropy: what analysis/outcomes.py classifies a run against.
    result = evaluation.evaluate(exp, eval_step, decode_fn, state.eval_variables())
    writer.write_scalars(0, result, split="eval")
    if jax.process_index() == 0:
      stats = {"split": exp.config.data.eval_split, **exp.data.target_unigram_entropy()}
      metrics_lib.write_text_atomic(epath.Path(workdir) / DATA_STATS_FILE, json.dumps(stats, indent=1))
    logging.info("eval at step 0: %s", json.dumps({k: round(v, 4) for k, v in result.items()}))
  pending = None  # (step, metrics) of the previous step, checked one step late so the host never stalls the device

  def check(step_metrics):
    done_step, m = step_metrics
    if not bool(m["finite"]):
      bad = _nonfinite_paths(m["grad_finite"], names)
      metrics_lib.write_status(
          workdir,
          "diverged",
          done_step,
          loss=float(m["loss"]),
          nonfinite_params=bad,
          last_checkpoint=exp.checkpointer.latest_step(),
      )
      writer.write_scalars(done_step, {"loss": float(m["loss"]), "diverged": 1.0})
      writer.close()
      raise stops.Diverged(
          f"non-finite loss or gradient at step {done_step}; non-finite gradients in "
          f"{bad[:5]}{'...' if len(bad) > 5 else ''}; last good checkpoint: "
          f"{exp.checkpointer.latest_step()}"
      )

  def log(done_step, m, extra):
    scalars = {
        "loss": m["loss"],
        "accuracy": m["accuracy"],
        "grad_norm": m["grad_norm"],
        "learning_rate": exp.schedule(done_step - 1),
    }
    scalars = {k: float(v) for k, v in scalars.items()}
    if cfg.grad_norms_every and done_step % cfg.grad_norms_every == 0:
      scalars.update({f"grad_norm/{n}": float(v) for n, v in zip(names, jax.tree.leaves(m["grad_norms"]))})
    if "max_logits" in m:  # QK-clip's measured S_max (train/qk_clip.py)
      scalars.update(qk_clip_lib.scalars(m["max_logits"], exp.config.optim.qk_clip))
    scalars.update(extra)
    writer.write_scalars(done_step, scalars)
    progress.update(done_step, loss=scalars["loss"])  # logs the progress line itself
    rate, eta = progress.steps_per_sec(), progress.eta_seconds()
    metrics_lib.write_status(
        workdir,
        "running",
        done_step,
        loss=scalars["loss"],
        learning_rate=scalars["learning_rate"],
        steps_per_sec=rate,
        eta_seconds=eta,
        total_steps=cfg.num_steps,
    )

  while step < cfg.num_steps:
    batch = step_lib.global_batch(next(it), exp.mesh)
    state, metrics = train_step(state, batch)
    step += 1
    at["step"] = step
    if pending is not None:
      check(pending)
    pending = (step, metrics)
    at_end = step == cfg.num_steps
    preempted = preemption.reached(step)  # every step, on every process (orbax's sync point needs each step)
    force_save = at_end or preempted
    due = [h for h in hooks if step % h.every == 0]
    if (
        step % cfg.log_every == 0
        or force_save
        or step % cfg.eval_every == 0
        or exp.checkpointer.should_save(step)
        or due
    ):
      check(pending)  # never log, evaluate, measure or checkpoint a state whose step was not finite
      pending = None
      extra = {}
      for hook in due:
        extra.update({k: float(v) for k, v in hook.fn(step, state, batch).items()})
      if step % cfg.log_every == 0 or at_end or due:
        log(step, metrics, extra)
    if step % cfg.eval_every == 0 or at_end:
      result = evaluation.evaluate(exp, eval_step, decode_fn, state.eval_variables())
      writer.write_scalars(step, result, split="eval")
      last_eval = (step, result)
      logging.info("eval at step %d: %s", step, json.dumps({k: round(v, 4) for k, v in result.items()}))
    if exp.checkpointer.should_save(step, force=force_save):
      exp.checkpointer.save(step, state, data_state=it.get_state(), force=force_save)
    if preempted and not at_end:
      exp.checkpointer.wait()
      writer.close()
      stop = (stops.Interrupted if preemption.interrupted else stops.Preempted)(step)
      metrics_lib.write_status(
          workdir, stop.status, step, total_steps=cfg.num_steps, last_checkpoint=exp.checkpointer.latest_step()
      )
      logging.warning("%s at step %d: checkpoint %d saved; rerun the workdir to resume", stop.status, step, step)
      raise stop
  if pending is not None:
    check(pending)
  exp.checkpointer.wait()
  writer.close()
  final = {f"eval_{k}": v for k, v in last_eval[1].items()} if last_eval else {}
  metrics_lib.write_status(workdir, "finished", step, total_steps=cfg.num_steps, **final)
  logging.info("%s", summary(workdir, step, last_eval))
  return state


def summary(workdir: str, step: int, last_eval: Optional[tuple]) -> str:
  """The closing lines of a run: final metrics, where the outputs are, how to look at them."""
  lines = [f"Finished at step {step}."]
  if last_eval:
    metrics = ", ".join(f"{k} {v:.4g}" for k, v in last_eval[1].items())
    lines.append(f"  eval at step {last_eval[0]}: {metrics}")
  lines += [
      f"  outputs: {workdir}/ (metrics.jsonl, status.json, config.json, checkpoints/)",
      f"  curves:  tensorboard --logdir {workdir}",
      "  rerun the same command to resume; raise --config.train.num_steps to train longer",
  ]
  return "\n".join(lines)
