"""The programs tests/test_distributed.py runs in subprocesses (not a test module: pytest collects test_*.py only).

python tests/distributed_worker.py --task=checks --address=127.0.0.1:P --process_id=I --num_processes=N --out=D
    one process of an N-process run: the SentencePiece model trained once (process 0) and received by the
    others, and `train.evaluation.decode_examples` split across processes and gathered; writes D/process_I.json.
"""

import json
import os
import sys

from absl import app, flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import train.data  # noqa: E402
import train.distributed  # noqa: E402
import train.evaluation  # noqa: E402
import train.loop  # noqa: E402
from configs import default  # noqa: E402
from train.data import tokenizers  # noqa: E402

flags.DEFINE_enum("task", None, ["checks"], "What to run.")
flags.DEFINE_string("address", None, "checks: the coordinator's host:port.")
flags.DEFINE_integer("process_id", 0, "checks: this process.")
flags.DEFINE_integer("num_processes", 2, "checks: processes in the run.")
flags.DEFINE_string("out", None, "checks: folder for the results (and per-process tokenizer caches).")
FLAGS = flags.FLAGS


def checks() -> None:
  cfg = default.get_config()
  cfg.distributed.coordinator_address = FLAGS.address
  cfg.distributed.num_processes, cfg.distributed.process_id = FLAGS.num_processes, FLAGS.process_id
  cfg.distributed.initialization_timeout = 60
  assert train.distributed.initialize(cfg.distributed)
  import jax  # after initialize: nothing above touched a device

  result = {"process_index": jax.process_index(), "process_count": jax.process_count()}
  # Tokenizer: a cache folder per process (hosts without a shared disk); count the corpus reads.
  cache = os.path.join(FLAGS.out, f"cache_{FLAGS.process_id}")
  os.makedirs(cache)
  reads = []

  def texts():
    reads.append(1)
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]
    return [" ".join(words[(i * j) % 8] for j in range(1, 7)) for i in range(400)]

  tok, path = tokenizers.load_or_train(texts, key="k", vocab_size=40, max_corpus_chars=100_000, cache_dirs=[cache])
  result.update(
      corpus_reads=len(reads),
      cache_files=sorted(os.listdir(cache)),
      path=path,
      vocab_size=tok.vocab_size,
      ids=tok.encode("gamma alpha theta zeta"),
  )
  # Decoding: a "decoder" that returns its inputs, so a hypothesis must be its own source, in order.
  config = default.get_config()
  config.model.preset = "tiny"
  config.data.embedded.num_train, config.data.embedded.num_eval = 200, 16
  config.data.batch_size = config.data.eval_batch_size = 8
  exp = train.loop.setup(config, os.path.join(FLAGS.out, "run"))
  examples = exp.data.eval_examples()[:11]  # 8 + 3: the second global batch is partial
  copy = jax.jit(lambda variables, inputs_BxS: inputs_BxS)
  hyps = train.evaluation.decode_examples(exp, copy, exp.state.model_variables(), examples)
  result.update(hypotheses=hyps, sources=[src for src, _ in examples])
  with open(os.path.join(FLAGS.out, f"process_{FLAGS.process_id}.json"), "w") as f:
    json.dump(result, f)


def main(argv):
  del argv
  {"checks": checks}[FLAGS.task]()


if __name__ == "__main__":
  app.run(main)
