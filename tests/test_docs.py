"""The documentation stands alone: every reference resolves inside the repository, the science document's numbers
are the code's, and the licence and citation metadata are present.

- No .py/.md file cites a source document that is not in the repository (the science notes and the "seed" posts the
  project started from): they are cited as docs/science.md §n or by author and year.
- Every "docs/science.md §n" (also "§n–m", "§n, §m") names a section that exists, and every link to an anchor of
  docs/science.md an anchor that exists; docs/science.md has the sections §1..§10 in order, each with its anchor.
- The constants docs/science.md quotes equal what init/math.py computes.
- Every module attribute (`init.schemes.SCHEMES`), file and test (`tests/x.py::test_y`) that docs/*.md names exists.
- LICENSE is the Apache License 2.0; CITATION.cff has cff-version 1.2.0, title, authors, license, version and date.
"""

import importlib
import os
import re

import pytest

from init import math as init_math

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCI_DOC = os.path.join(ROOT, "docs", "science.md")
SKIP_DIRS = {".git", ".venv", "venv", "runs", "__pycache__", ".pytest_cache", ".ruff_cache"}

# References to documents outside the repository. Written with a character class so that this file does not match
# its own patterns.
FORBIDDEN = re.compile(r"SCIENC[E]\.md|SCIENC[E]\s*§|seeds? 00\d|see[d] blogs?\b|Q&A see[d]|seed experimen[t]")
# "docs/science.md" followed by one or more "§n" or "§n–m", separated by commas.
SECTION_REF = re.compile(r"docs/science\.md((?:\s*,?\s*§\s*\d+(?:\s*[–-]\s*\d+)?)+)")
ANCHOR_REF = re.compile(r"docs/science\.md#([\w-]+)")


def repo_files(*exts):
  for dirpath, dirnames, filenames in os.walk(ROOT):
    dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
    for name in sorted(filenames):
      if name.endswith(exts):
        yield os.path.join(dirpath, name)


def read(path):
  with open(path, encoding="utf-8") as f:
    return f.read()


def science_sections():
  """Section numbers of docs/science.md's `## §n` headings, in order, and its `<a id=...>` anchors."""
  text = read(SCI_DOC)
  return [int(n) for n in re.findall(r"^## §(\d+)\b", text, re.M)], set(re.findall(r'<a id="([\w-]+)"></a>', text))


def cited_sections(text):
  """Section numbers named by every "docs/science.md §..." reference in `text`, with the reference."""
  for m in SECTION_REF.finditer(text):
    for lo, hi in re.findall(r"§\s*(\d+)(?:\s*[–-]\s*(\d+))?", m.group(1)):
      for n in range(int(lo), int(hi or lo) + 1):
        yield n, m.group(0)


def test_no_reference_to_documents_outside_the_repository():
  hits = []
  for path in repo_files(".py", ".md"):
    for i, line in enumerate(read(path).splitlines(), 1):
      if FORBIDDEN.search(line):
        hits.append(f"{os.path.relpath(path, ROOT)}:{i}: {line.strip()}")
  assert not hits, "cite docs/science.md §n or the paper instead:\n" + "\n".join(hits)


def test_science_md_has_sections_1_to_10_in_order_with_anchors():
  sections, anchors = science_sections()
  assert sections == list(range(1, 11))
  assert {f"s{n}" for n in sections} <= anchors


def test_cited_science_sections_exist():
  sections, anchors = science_sections()
  bad, count = [], 0
  for path in repo_files(".py", ".md", ".cff"):
    text = read(path)
    for n, ref in cited_sections(text):
      count += 1
      if n not in sections:
        bad.append(f"{os.path.relpath(path, ROOT)}: {ref!r} names §{n}")
    bad += [f"{os.path.relpath(path, ROOT)}: no anchor #{a}" for a in ANCHOR_REF.findall(text) if a not in anchors]
  assert count > 50  # the code cites the document throughout; the parser must see those references
  assert not bad, "\n".join(bad)


def test_section_reference_parser():
  text = "(docs/science.md §1, §2, §7) and docs/science.md §1–2; Vaswani §3.2.1; docs/science.md §10)"
  assert [n for n, _ in cited_sections(text)] == [1, 2, 7, 1, 2, 10]
  assert FORBIDDEN.search("see " + "SCIENC" + "E.md §4") and FORBIDDEN.search("seed " + "001 §3")
  assert not FORBIDDEN.search("the seed changes init and dropout keys")


def test_science_md_constants_are_the_codes():
  """Numbers quoted in docs/science.md, recomputed by init/math.py (papers: see the sections)."""
  text = read(SCI_DOC)
  factor = init_math.truncated_normal_std_factor()
  lam, alpha = init_math.selu_constants()
  tfixup = init_math.tfixup_scales(6, 6)
  deepnorm = init_math.deepnorm_constants("encoder_decoder", 6, 6)
  expected = [
      f"{factor:.8f}",  # §1: 0.87962566
      f"{factor**2:.8f}",  # §1: variance factor 0.77374130
      f"{1 / factor:.7f}",  # §1: 1.1368472
      f"{0.02 * factor:.6f}",  # §1: BERT's 0.02 realizes 0.017593
      f"{init_math.xavier_std(768, 768):.4f}",  # §2: 0.0361
      f"{init_math.activation_second_moment(_gelu):.5f}",  # §2: E[gelu(z)²] = 0.42522
      f"{lam:.12f}",  # §2: SELU λ = 1.0507009873554805 (solved; the last digits are the solver's)
      f"{alpha:.12f}",  # §2: SELU α = 1.6732632423543772
      f"{tfixup['encoder']:.4f}",  # §7: 0.4281
      f"{tfixup['decoder']:.4f}",  # §7: 0.3689
      "(α, β) = ({:.4f}, {:.4f})".format(*deepnorm["encoder"]),  # §6
      "({:.4f}, {:.4f})".format(*deepnorm["decoder"]),  # §6
  ]
  missing = [value for value in expected if value not in text]
  assert not missing, f"docs/science.md does not quote {missing}"


def _gelu(x):
  from scipy.special import erf

  return 0.5 * x * (1.0 + erf(x / 2**0.5))


def _resolve_attribute(dotted):
  parts = dotted.split(".")
  for i in range(len(parts), 0, -1):
    try:
      obj = importlib.import_module(".".join(parts[:i]))
    except ImportError:
      continue
    for name in parts[i:]:
      obj = getattr(obj, name)
    return obj
  raise ImportError(dotted)


@pytest.mark.parametrize("doc", ["science.md", "extending.md"])
def test_names_in_docs_exist(doc):
  """`pkg.module.attr`, `path/file.py` and `tests/x.py::test_y` in backticks all exist."""
  text = read(os.path.join(ROOT, "docs", doc))
  missing, checked = [], 0
  for token in re.findall(r"`([^`\s]+)`", text):
    token = token.rstrip(".,;:")
    if re.fullmatch(r"(analysis|init|models|train|configs)(\.\w+)+", token):
      checked += 1
      try:
        _resolve_attribute(token)
      except (ImportError, AttributeError) as e:
        missing.append(f"{token} ({e})")
    elif re.fullmatch(r"[\w./]+\.(py|md|txt|cff)(::\w+)?", token) and "<" not in token:
      path, _, test = token.partition("::")
      full = os.path.join(ROOT, path)
      checked += 1
      if not os.path.exists(full) and not os.path.exists(os.path.join(ROOT, "docs", path)):
        missing.append(token)
      elif test and not re.search(rf"^def {test}\(", read(full), re.M):
        missing.append(token)
  assert checked >= 10
  assert not missing, f"docs/{doc} names what does not exist: {missing}"


def test_license_is_apache_2():
  text = read(os.path.join(ROOT, "LICENSE"))
  assert "Apache License" in text and "Version 2.0, January 2004" in text
  assert (
      "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text and "END OF TERMS AND CONDITIONS" in text
  )
  assert "Copyright 2026 The transformer-init Authors" in text


def test_citation_cff_has_the_required_keys():
  text = read(os.path.join(ROOT, "CITATION.cff"))
  top = dict(re.findall(r"^([a-z-]+):[ \t]*(.*)$", text, re.M))  # top-level keys only (no indentation)
  assert top.get("cff-version") == "1.2.0"
  for key in ("message", "title", "authors", "license", "version", "date-released"):
    assert key in top, f"CITATION.cff lacks {key}"
  assert top["license"] == "Apache-2.0"
  assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", top["date-released"])
  assert re.search(r"^authors:\n  - name: \"The transformer-init Authors\"$", text, re.M)
