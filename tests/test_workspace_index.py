"""The workspace index on small repositories written by the tests (real tree-sitter)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from lsp_server.workspace.exclusions import Exclusions
from lsp_server.workspace.index import IndexLimits, WorkspaceIndex

ROOT = Path(__file__).resolve().parent.parent

INVOICE = '''"""Invoices."""

from decimal import Decimal


class InvoiceLine:
    """One billed item."""

    def __init__(self, sku, quantity, unit_price):
        self.sku = sku
        self.quantity = quantity
        self.unit_price = unit_price


def compute_invoice_total(line_items, tax_rate, discount_schedule):
    """Sum the lines, apply the discount schedule, then the tax rate."""
    subtotal = sum(item.quantity * item.unit_price for item in line_items)
    discount = discount_schedule.rate_for(subtotal)
    return (subtotal - discount) * (1 + tax_rate)
'''

REPORT = '''"""Monthly reports."""


def monthly_report(invoices):
    rows = []
    for invoice in invoices:
        rows.append((invoice.number, invoice.tax_rate, len(invoice.line_items)))
    return rows
'''

QUERY = """
def checkout(cart, customer):
    line_items = [InvoiceLine(p.sku, p.quantity, p.unit_price) for p in cart]
    total = compute_invoice_total(line_items, customer.tax_rate, customer.discount_schedule)
"""

TS = """import { Decoder } from "./decoder";

/** Options for the loader.
 * More words. */
export interface LoaderOptions {
  strict: boolean;
}

// Loads a config file.
export async function loadConfig(
  path: string,
  options: LoaderOptions,
): Promise<Config> {
  return new Decoder(options).decode(path);
}

export const parseFlags = (argv: string[]): Flags => {
  return {};
};

export class ConfigStore extends Store {
  /** Saves it. */
  save(config: Config): void {}
}

export type Mode = "fast" | "slow";
"""

GO = """package cache

// Entry is one cached value.
type Entry struct {
	Key string
}

// Lookup finds the entry for key.
func Lookup(key string, fresh bool) (*Entry, error) {
	return nil, nil
}

func (e *Entry) Expired() bool { return false }
"""


def filler(i: int) -> str:
    """A module of ordinary code: windows for the idf statistics to tell rare names apart."""
    rows = [f'"""Helpers, part {i}."""', ""]
    for j in range(6):
        rows += [
            f"def helper_{i}_{j}(value, options=None):",
            "    result = []",
            "    for item in value:",
            f"        result.append(item * {j})",
            "    return result",
            "",
        ]
    return "\n".join(rows) + "\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root / "billing" / "invoice.py", INVOICE)
    write(root / "billing" / "report.py", REPORT)
    write(root / "web" / "config.ts", TS)
    write(root / "cache" / "cache.go", GO)
    for i in range(12):
        write(root / "util" / f"helpers_{i}.py", filler(i))
    write(root / "README.md", "compute_invoice_total line_items tax_rate discount_schedule\n")
    return root


def index_of(root: Path, store: Path | None = None, **limits: int) -> WorkspaceIndex:
    return WorkspaceIndex(root, store, IndexLimits(**limits), Exclusions(root))


def test_search_finds_the_window_sharing_rare_names(repo: Path) -> None:
    index = index_of(repo)
    report = index.build()
    assert report.files == 16 and report.read == 16 and not report.truncated
    found = index.search(QUERY, budget_chars=4000, top=1)
    assert [s.path for s in found] == ["billing/invoice.py"]
    assert "def compute_invoice_total(line_items, tax_rate, discount_schedule):" in found[0].text


def test_best_window_comes_last(repo: Path) -> None:
    index = index_of(repo)
    index.build()
    found = index.search(QUERY, budget_chars=4000, top=2)
    assert [s.path for s in found] == ["billing/report.py", "billing/invoice.py"]


def test_windows_are_stripped_and_never_overlap(repo: Path) -> None:
    index = index_of(repo, window_lines=6, window_step=3)
    index.build()
    found = index.search(QUERY, budget_chars=4000, top=5)
    assert found
    for snippet in found:
        lines = snippet.text.split("\n")
        assert lines[0].strip() and lines[-1].strip()
    invoice = [s.text for s in found if s.path == "billing/invoice.py"]
    assert len(invoice) >= 2
    # No line of the file is quoted twice.
    quoted = [line for text in invoice for line in text.split("\n") if line.strip()]
    assert len(quoted) == len(set(quoted))


def test_skip_and_budget(repo: Path) -> None:
    index = index_of(repo)
    index.build()
    found = index.search(QUERY, budget_chars=4000, skip={"billing/invoice.py"})
    assert found and all(s.path != "billing/invoice.py" for s in found)
    whole = index.search(QUERY, budget_chars=4000, top=2)
    budget = len(whole[-1].text) + 10
    fits = index.search(QUERY, budget_chars=budget, top=2)
    assert sum(len(s.text) for s in fits) <= budget
    assert index.search(QUERY, budget_chars=20, top=2) == []
    assert index.search(QUERY, budget_chars=0) == []


def test_unrelated_queries_find_nothing(repo: Path) -> None:
    index = index_of(repo)
    index.build()
    assert index.search("completely unrelated words here", budget_chars=4000) == []
    # One shared name is not enough, however rare.
    assert index.search("x = monthly_report(y)", budget_chars=4000) == []
    # Words in more than half the windows count for nothing.
    assert index.search("result value item", budget_chars=4000) == []


def test_definitions_python(repo: Path) -> None:
    index = index_of(repo)
    index.build()
    found = index.definitions(["compute_invoice_total", "InvoiceLine", "__init__", "nothing"])
    by_name = {d.name: d for d in found}
    total = by_name["compute_invoice_total"]
    assert total.kind == "function" and total.path == "billing/invoice.py" and total.line == 14
    assert total.signature == "def compute_invoice_total(line_items, tax_rate, discount_schedule):"
    assert total.doc == "Sum the lines, apply the discount schedule, then the tax rate."
    assert by_name["InvoiceLine"].signature == "class InvoiceLine:"
    assert by_name["InvoiceLine"].doc == "One billed item."
    assert by_name["__init__"].kind == "method"
    assert [d.name for d in found] == ["compute_invoice_total", "InvoiceLine", "__init__"]
    assert index.definitions(["compute_invoice_total"], skip={"billing/invoice.py"}) == []


def test_definitions_typescript_and_go(repo: Path) -> None:
    index = index_of(repo)
    index.build()
    names = ["LoaderOptions", "loadConfig", "parseFlags", "ConfigStore", "save", "Mode"]
    ts = {d.name: d for d in index.definitions(names)}
    assert ts["LoaderOptions"].kind == "interface"
    assert ts["LoaderOptions"].signature == "export interface LoaderOptions"
    assert ts["LoaderOptions"].doc == "Options for the loader."
    assert ts["loadConfig"].signature == (
        "export async function loadConfig(path: string, options: LoaderOptions): Promise<Config>"
    )
    assert ts["loadConfig"].doc == "Loads a config file."
    assert ts["parseFlags"].kind == "function"
    assert ts["parseFlags"].signature == "export const parseFlags = (argv: string[]): Flags =>"
    assert ts["ConfigStore"].signature == "export class ConfigStore extends Store"
    assert (ts["save"].kind, ts["save"].doc) == ("method", "Saves it.")
    assert ts["Mode"].kind == "type"
    go = {d.name: d for d in index.definitions(["Entry", "Lookup", "Expired"])}
    assert (go["Entry"].signature, go["Entry"].doc) == (
        "type Entry struct",
        "Entry is one cached value.",
    )
    assert go["Lookup"].signature == "func Lookup(key string, fresh bool) (*Entry, error)"
    assert go["Lookup"].doc == "Lookup finds the entry for key."
    assert go["Expired"].kind == "method"
    assert go["Expired"].signature == "func (e *Entry) Expired() bool"


def test_definitions_prefer_one_per_name_and_drop_ambiguous_names(tmp_path: Path) -> None:
    write(tmp_path / "a.py", "class Loader:\n    def run(self): pass\n\ndef run(): pass\n")
    for i in range(4):
        write(tmp_path / f"m{i}.py", "def common(): pass\n")
    write(tmp_path / "b.py", "def other(): pass\n")
    index = index_of(tmp_path)
    index.build()
    found = index.definitions(["run", "common", "Loader", "other"], limit=3)
    assert [(d.name, d.kind) for d in found] == [
        ("run", "function"),
        ("Loader", "class"),
        ("other", "function"),
    ]
    # With room left, the other places come after one per name.
    found = index.definitions(["run", "Loader"], limit=8)
    assert [(d.name, d.kind) for d in found] == [
        ("run", "function"),
        ("Loader", "class"),
        ("run", "method"),
    ]
    # Ambiguity counts the places left once `skip` is taken out.
    assert index.definitions(["common"]) == []
    assert len(index.definitions(["common"], skip={"m0.py"})) == 3


def test_secrets_and_ignored_files_never_appear(repo: Path) -> None:
    secret = INVOICE.replace("InvoiceLine", "LeakedLine")
    write(repo / ".env.py", secret)
    write(repo / "id_rsa.py", secret)
    write(repo / "secrets.py", secret)
    write(repo / ".fastcompleteignore", "private/\n")
    write(repo / "private" / "keys.py", secret)
    write(repo / ".gitignore", "generated/\n*.gen.py\n")
    write(repo / "generated" / "api.py", secret)
    write(repo / "billing" / "invoice.gen.py", secret)
    write(repo / "billing" / ".gitignore", "local.py\n")
    write(repo / "billing" / "local.py", secret)
    write(repo / "node_modules" / "dep" / "index.py", secret)
    index = index_of(repo)
    report = index.build()
    # Skipped: the 5 files; excluded and ignored folders are not walked at all.
    assert report.files == 16 and report.skipped == 5
    found = index.search(QUERY, budget_chars=100_000, top=10)
    assert {s.path for s in found} <= {"billing/invoice.py", "billing/report.py"}
    assert index.definitions(["LeakedLine", "compute_invoice_total"]) == [
        *index.definitions(["compute_invoice_total"])
    ]
    # Nor does updating them add them.
    for name in (".env.py", "private/keys.py", "generated/api.py", "billing/local.py"):
        index.update(repo / name)
    assert index.file_count == 16
    assert index.definitions(["LeakedLine"]) == []


def test_binary_big_and_other_files_are_skipped(tmp_path: Path) -> None:
    write(tmp_path / "ok.py", "def fine(): pass\n")
    (tmp_path / "blob.py").write_bytes(b"def x():\0\0\0 pass\n")
    write(tmp_path / "big.py", "x = 1\n" * 200)
    write(tmp_path / "notes.txt", "def prose(): pass\n")
    write(tmp_path / "Main.java", "class Main { void run() {} }\n")
    index = index_of(tmp_path, max_file_bytes=1000)
    report = index.build()
    assert report.files == 2  # ok.py, and Main.java (snippets only: no grammar)
    assert report.skipped == 2
    assert [d.name for d in index.definitions(["fine", "x", "prose", "run"])] == ["fine"]


def test_symlinks_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside / "far.py", "def far_away(): pass\n")
    root = tmp_path / "root"
    write(root / "near.py", "def near(): pass\n")
    os.symlink(outside, root / "link")
    os.symlink(outside / "far.py", root / "far.py")
    index = index_of(root)
    assert index.build().files == 1
    assert index.definitions(["far_away"]) == []


def test_persistence_reuses_unchanged_files(repo: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = index_of(repo, store)
    assert first.build().read == 16
    assert len(list(store.iterdir())) == 1  # one folder per workspace
    second = index_of(repo, store)
    report = second.build()
    assert (report.reused, report.read, report.files) == (16, 0, 16)
    assert second.search(QUERY, budget_chars=4000) == first.search(QUERY, budget_chars=4000)
    assert second.definitions(["loadConfig", "Entry"]) == first.definitions(["loadConfig", "Entry"])
    # A changed file is read again; a new one read; a deleted one dropped.
    invoice = repo / "billing" / "invoice.py"
    invoice.write_text(INVOICE.replace("compute_invoice_total", "invoice_grand_total"))
    os.utime(invoice, ns=(1, 1))
    write(repo / "billing" / "extra.py", "def extra_thing(): pass\n")
    (repo / "billing" / "report.py").unlink()
    third = index_of(repo, store)
    report = third.build()
    assert (report.reused, report.read, report.files) == (14, 2, 16)
    assert third.definitions(["compute_invoice_total"]) == []
    assert third.definitions(["invoice_grand_total"])[0].path == "billing/invoice.py"
    assert third.definitions(["monthly_report"]) == []


def test_a_second_build_of_the_same_index_reads_nothing(repo: Path) -> None:
    index = index_of(repo)
    index.build()
    report = index.build()
    assert (report.reused, report.read) == (16, 0)


def _truncate_segments(folder: Path) -> None:
    for path in folder.iterdir():
        if path.suffix in (".idx", ".store", ".term"):
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize(
    "damage",
    [
        lambda folder: (folder / "meta.json").write_text("not json"),
        lambda folder: (folder / "meta.json").write_text((folder / "meta.json").read_text()[:40]),
        lambda folder: (folder / "meta.json").unlink(),
        _truncate_segments,
    ],
)
def test_a_damaged_store_is_rebuilt(repo: Path, tmp_path: Path, damage) -> None:
    store = tmp_path / "store"
    index_of(repo, store).build()
    (folder,) = store.iterdir()
    damage(folder)
    index = index_of(repo, store)
    report = index.build()
    assert report.files == 16 and report.read + report.reused == 16
    assert [s.path for s in index.search(QUERY, budget_chars=4000, top=1)] == ["billing/invoice.py"]
    assert index_of(repo, store).build().reused == 16  # stored again, whole


def test_a_killed_build_leaves_an_index_that_opens(repo: Path, tmp_path: Path) -> None:
    """kill -9 in the middle of indexing: the next start opens what was committed and reads
    only the rest."""
    for i in range(400):  # enough files that the build is still running when it is killed
        body = f"    value_{i} += 1\n" * 40
        write(repo / "many" / f"m{i:03}.py", f"def fn_{i}(value_{i}):\n{body}")
    store = tmp_path / "store"
    script = (
        "import sys, os, signal\n"
        "from pathlib import Path\n"
        "from lsp_server.workspace.index import WorkspaceIndex\n"
        "index = WorkspaceIndex(Path(sys.argv[1]), Path(sys.argv[2]))\n"
        "def step(done, total):\n"
        "    if done == 200:\n"
        "        index.search('compute_invoice_total subtotal', budget_chars=99)  # commits\n"
        "    if done == 300:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "index.build(step)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(repo), str(store)], cwd=ROOT)
    assert done.returncode == -signal.SIGKILL
    index = index_of(repo, store)
    report = index.build()
    assert report.files == 416 and report.reused >= 200 and report.read <= 216
    assert [s.path for s in index.search(QUERY, budget_chars=4000, top=1)] == ["billing/invoice.py"]
    assert index.definitions(["fn_399"])[0].path == "many/m399.py"


def test_update_and_remove(repo: Path) -> None:
    index = index_of(repo)
    index.build()
    version = index.version
    report = repo / "billing" / "report.py"
    report.write_text(REPORT + "\n\ndef yearly_summary(invoices):\n    return len(invoices)\n")
    index.update(report)
    assert index.version > version
    assert index.definitions(["yearly_summary"])[0].path == "billing/report.py"
    added = write(repo / "billing" / "refunds.py", INVOICE.replace("InvoiceLine", "RefundLine"))
    index.update(added)
    assert index.file_count == 17
    assert index.definitions(["RefundLine"])[0].path == "billing/refunds.py"
    index.remove(added)
    assert index.file_count == 16 and index.definitions(["RefundLine"]) == []
    (repo / "billing" / "invoice.py").unlink()
    index.update(repo / "billing" / "invoice.py")
    assert index.file_count == 15
    assert all(s.path != "billing/invoice.py" for s in index.search(QUERY, budget_chars=9000))
    assert index.definitions(["compute_invoice_total"]) == []
    index.update(repo.parent / "elsewhere.py")  # outside the root: nothing happens
    assert index.file_count == 15
    # A deleted folder takes its files along.
    for path in (repo / "util").iterdir():
        path.unlink()
    (repo / "util").rmdir()
    index.update(repo / "util")
    assert index.file_count == 3
    index.remove(repo / "web")
    assert index.file_count == 2


def test_many_updates_stay_searchable(repo: Path) -> None:
    # Enough changed and new files to merge the pending ones into the sorted postings more than
    # once, with the windows of replaced and removed files dropped on the way.
    index = index_of(repo)
    index.build()
    invoice = repo / "billing" / "invoice.py"
    for i in range(150):
        invoice.write_text(INVOICE + f"\nVERSION = {i}\n")
        os.utime(invoice, ns=(i, i))
        index.update(invoice)
        index.update(write(repo / "more" / f"extra_{i}.py", filler(100 + i)))
        helpers = repo / "util" / f"helpers_{i // 3}.py"
        if i % 3 == 0 and helpers.exists():
            helpers.unlink()
            index.remove(helpers)
    assert index.file_count == 16 - 12 + 150
    found = index.search(QUERY, budget_chars=4000, top=1)
    assert [s.path for s in found] == ["billing/invoice.py"]
    assert "VERSION" not in found[0].text or "VERSION = 149" in found[0].text
    assert len(index.definitions(["compute_invoice_total"])) == 1
    assert index.definitions(["helper_3_0"]) == []
    assert index.definitions(["helper_249_5"])[0].path == "more/extra_149.py"
    fresh = index_of(repo)
    fresh.build()
    assert fresh.search(QUERY, budget_chars=4000) == index.search(QUERY, budget_chars=4000)


def test_max_files_truncates(repo: Path) -> None:
    index = index_of(repo, max_files=5)
    report = index.build()
    assert report.truncated and report.files == 5 == index.file_count
    # Breadth first: the files nearest the root go first.
    assert index.relative(repo / "README.md") == "README.md"


def test_progress_and_search_while_building(repo: Path) -> None:
    index = index_of(repo)
    calls: list[tuple[int, int]] = []
    counts: list[int] = []
    during: list[list[str]] = []

    def look() -> None:
        counts.append(index.file_count)
        during.append([s.path for s in index.search(QUERY, budget_chars=4000)])

    def progress(done: int, total: int) -> None:
        calls.append((done, total))
        # From another thread, as the server does, while the build goes on.
        worker = threading.Thread(target=look)
        worker.start()
        worker.join()

    index.build(progress)
    assert calls == [(i, 16) for i in range(1, 17)]
    assert counts == list(range(1, 17))
    # The files indexed so far (not yet merged into the sorted postings) are searched.
    assert during[-1] == [s.path for s in index.search(QUERY, budget_chars=4000)]
    assert during[-1] == ["billing/report.py", "billing/invoice.py"]


def test_cancel_stops_between_files(repo: Path, tmp_path: Path) -> None:
    cancel = threading.Event()
    store = tmp_path / "store"
    index = index_of(repo, store)

    def progress(done: int, total: int) -> None:
        if done == 3:
            cancel.set()

    report = index.build(progress, cancel)
    assert report.files == 3 == index.file_count
    # What a cancelled build indexed is kept: the next one reads only the rest.
    assert index_of(repo, store).build().read == 13


def test_relative(repo: Path) -> None:
    index = index_of(repo)
    assert index.relative(repo / "billing" / "invoice.py") == "billing/invoice.py"
    assert index.relative((repo / "my file.py").as_uri()) == "my file.py"
    assert index.relative(str(repo / "a" / ".." / "b.py")) == "b.py"
    assert index.relative(repo) is None
    assert index.relative(repo.parent / "other.py") is None
    assert index.relative("untitled:Untitled-1") is None
