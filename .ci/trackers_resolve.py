"""CI: the documented trackers (wandb, trackio) install beside requirements.txt without moving a pin (issue 41).

Asks pip for the install report of `-r requirements.txt <tracker>` (a dry run: nothing is installed) and fails,
naming the package, when it would install a pinned package at another version.
"""

import json
import re
import subprocess
import sys
import tempfile

TRACKERS = ("wandb", "trackio")


def pins(path: str = "requirements.txt") -> dict[str, str]:
  out = {}
  for line in open(path, encoding="utf-8"):
    m = re.match(r"^([A-Za-z0-9_.\[\]-]+)==([^\s#]+)", line)
    if m:
      out[re.sub(r"\[.*\]", "", m.group(1)).lower().replace("_", "-")] = m.group(2)
  return out


def main() -> int:
  pinned, bad = pins(), []
  for tracker in TRACKERS:
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
      cmd = [sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--ignore-installed", "--report", report.name,
             "-r", "requirements.txt", tracker]  # fmt: skip
      subprocess.run(cmd, check=True, capture_output=True)
      for item in json.load(open(report.name, encoding="utf-8"))["install"]:
        name, version = item["metadata"]["name"].lower().replace("_", "-"), item["metadata"]["version"]
        if name in pinned and version != pinned[name]:
          bad.append(f"{tracker} moves {name} from {pinned[name]} to {version}")
  print("\n".join(bad) or f"{', '.join(TRACKERS)} install beside requirements.txt without moving a pin")
  return 1 if bad else 0


if __name__ == "__main__":
  sys.exit(main())
