"""Which runs and devices are a process's (experiments/shard.py): the shard each scheduler's variables give, the bad
specs that fail naming the key, the partition of the runs over the shards, and a local run's children splitting its
shard and the host's devices. The claims and the sweeps over shards end to end: tests/test_shard.py."""

import pytest

from experiments import shard as shard_lib

# ------------------------------------------------------------------------------------------- which shard am I


@pytest.mark.parametrize(
    "spec, num_shards, env, want",
    [
        ("1/4", 0, {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_COUNT": "8"}, (1, 4)),  # the config wins
        ("auto", 0, {}, (0, 1)),  # no array: the whole sweep
        (
            "auto",
            0,
            {"TRANSFORMER_INIT_SHARD": "2/3", "SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "2"},
            (2, 3),
        ),
        ("auto", 0, {"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "8"}, (5, 8)),  # --array=0-7
        # --array=1-15:2 has 8 tasks 1, 3, ..., 15: task 7 is the 4th (position 3)
        (
            "auto",
            0,
            {
                "SLURM_ARRAY_TASK_ID": "7",
                "SLURM_ARRAY_TASK_COUNT": "8",
                "SLURM_ARRAY_TASK_MIN": "1",
                "SLURM_ARRAY_TASK_STEP": "2",
            },
            (3, 8),
        ),
        ("auto", 6, {"JOB_COMPLETION_INDEX": "4"}, (4, 6)),  # a Kubernetes indexed Job of 6 completions
    ],
)
def test_the_shard_each_scheduler_gives(spec, num_shards, env, want):
  assert shard_lib.resolve_shard(spec, num_shards, env)[:2] == want


@pytest.mark.parametrize(
    "spec, num_shards, env, process_count, match",
    [
        ("2/2", 0, {}, 1, r"config.sweep.shard='2/2' is invalid; valid: 'i/N' with 0 <= i < N"),
        ("a/b", 0, {}, 1, r"config.sweep.shard='a/b' is invalid"),
        ("auto", 0, {"TRANSFORMER_INIT_SHARD": "3"}, 1, r"^TRANSFORMER_INIT_SHARD='3' is invalid"),
        (
            "auto",
            0,
            {"JOB_COMPLETION_INDEX": "1"},
            1,
            r"config.sweep.num_shards=0 is invalid; valid: the indexed Job.s completions",
        ),
        ("auto", 4, {"JOB_COMPLETION_INDEX": "1"}, 2, r"differs between the 2 processes of one run"),
        (
            "auto",
            0,
            {
                "SLURM_ARRAY_TASK_ID": "4",
                "SLURM_ARRAY_TASK_COUNT": "8",
                "SLURM_ARRAY_TASK_MIN": "1",
                "SLURM_ARRAY_TASK_STEP": "2",
            },
            1,
            r"^SLURM_ARRAY_TASK_ID=4 is invalid; valid: a task of the array 1..15 step 2",
        ),
    ],
)
def test_bad_shards_fail_naming_the_key(spec, num_shards, env, process_count, match):
  with pytest.raises(ValueError, match=match):
    shard_lib.resolve_shard(spec, num_shards, env, process_count=process_count)


def test_shards_partition_the_runs():
  taken = [[i for i in range(10) if shard_lib.mine(i, (s, 3))] for s in range(3)]
  assert taken == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]


# --------------------------------------------------------------------------------------- runs at once on one machine


def test_local_children_split_the_shard_and_the_devices():
  assert shard_lib.child_shards((0, 1), 2) == ["0/2", "1/2"]
  assert shard_lib.child_shards((1, 3), 2) == ["1/6", "4/6"]  # shard 1/3's runs 1, 4, 7, 10, ... split in two
  taken = [[i for i in range(12) if shard_lib.mine(i, shard_lib.parse_shard(s))] for s in ["1/6", "4/6"]]
  assert taken == [[1, 7], [4, 10]]
  gpus = {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}
  assert [shard_lib.child_env(j, 2, gpus)["CUDA_VISIBLE_DEVICES"] for j in range(2)] == ["0,1", "2,3"]
  with pytest.raises(ValueError, match=r"config.sweep.parallel=3 is invalid; valid: a divisor of this host's 4 GPU"):
    shard_lib.child_env(0, 3, gpus)
  cpu = {
      "JAX_PLATFORMS": "cpu",
      "XLA_FLAGS": "--xla_backend_optimization_level=0 --xla_force_host_platform_device_count=4",
  }
  assert shard_lib.child_env(1, 2, cpu)["XLA_FLAGS"] == (
      "--xla_backend_optimization_level=0 --xla_force_host_platform_device_count=2"
  )
  with pytest.raises(ValueError, match="1 on a TPU host"):
    shard_lib.child_env(0, 2, {"JAX_PLATFORMS": "tpu"})
