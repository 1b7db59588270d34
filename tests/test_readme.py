"""README.md reads in two minutes and every command and link in it works: at most 150 lines, a quick start of exactly
two commands, every `python main.py` command's config file and `--config.` keys exist, and every relative link of the
README, of docs/ and of the reports written from the records (REPRODUCTION.md, ATLAS.md) resolves to a file (and a
heading or an `<a id>`, for an anchor into Markdown)."""

import importlib.util
import re
import shlex

import pytest

from tests.conftest import REPO

README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
REPORTS = [REPO / "reports" / "REPRODUCTION.md", REPO / "reports" / "ATLAS.md"]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _blocks(text: str, lang: str) -> list[str]:
  return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def test_the_readme_is_short_and_opens_with_two_commands():
  text = README.read_text(encoding="utf-8")
  assert len(text.splitlines()) <= 150
  quick = text[text.index("## Quick start") :]
  quick = quick[: quick.index("\n## ", 3)]
  commands = [line for block in _blocks(quick, "bash") for line in block.splitlines() if line.strip()]
  assert len(commands) == 2 and commands[0].endswith("python main.py --config=configs/t5_init.py"), commands
  assert commands[1].endswith("python -m pytest"), commands


def _config(path: str):
  file, _, scale = path.partition(":")
  spec = importlib.util.spec_from_file_location("readme_config", REPO / file)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(scale) if scale else module.get_config()


def _main_commands(text: str) -> list[list[str]]:
  lines = [line.split("#")[0] for block in _blocks(text, "bash") for line in block.splitlines()]
  return [shlex.split(line[line.index("python main.py") :]) for line in lines if "python main.py" in line]


@pytest.mark.parametrize("args", _main_commands(README.read_text(encoding="utf-8")), ids=" ".join)
def test_every_main_py_command_names_a_config_file_and_keys_that_exist(args):
  flags = dict(a[2:].split("=", 1) for a in args[2:] if a.startswith("--"))
  assert (REPO / flags["config"].partition(":")[0]).is_file(), flags["config"]
  config = _config(flags["config"])
  for key in (k for k in flags if k.startswith("config.")):
    node = config
    for part in key.split(".")[1:]:
      assert part in node, f"{key} is not a key of {flags['config']}"
      node = node[part]


def _anchors(markdown: str) -> set[str]:
  """GitHub's heading anchors (lower case, punctuation but '-' and '_' dropped, spaces to hyphens) and explicit
  `<a id="...">` ones."""
  heads = re.findall(r"^#+ (.+)$", markdown, re.M)
  ids = re.findall(r'<a id="([^"]+)">', markdown)
  return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads} | set(ids)


@pytest.mark.parametrize("page", [README, *DOCS, *REPORTS], ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
  for target in LINK.findall(page.read_text(encoding="utf-8")):
    if target.startswith(("http://", "https://", "mailto:")):
      continue
    path, _, anchor = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    assert file.exists(), f"{page.name}: {target} does not exist"
    if anchor and file.suffix == ".md":
      assert anchor in _anchors(file.read_text(encoding="utf-8")), f"{page.name}: {target} has no such heading"
