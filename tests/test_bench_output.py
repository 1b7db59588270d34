"""bench/hessian.py prints each measurement as it lands, so a run stopped at a lease's limit still reports the rows
measured before it (reports/BENCH_H200.md: two runs on an H200 returned no number, the table printing only at the
end of a section)."""

import numpy as np

from bench.hessian import _Landed


def test_each_measurement_is_printed_when_it_is_stored(capsys):
  r = _Landed()
  r["grad"] = 0.0123456
  assert capsys.readouterr().out == "  measured grad: 0.01235\n"
  # A routine's (first call, second call, compiles, result): the numbers, not the result's arrays.
  r["lanczos1"] = (10.43, 0.185, 0, {"ritz_values": np.ones(3)})
  assert capsys.readouterr().out == "  measured lanczos1: 10.43, 0.185, 0\n"
  assert r["lanczos1"][0] == 10.43 and set(r) == {"grad", "lanczos1"}
