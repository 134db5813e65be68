"""make test: executes notebooks/baseline.ipynb headless (nbclient) on every committed run
under data/, and notebooks/faults.ipynb on every committed fault sweep (data/fault-sweep-*,
with the newest data/fault-repeat-*); fails on any cell error or a missing figure, and
checks that the committed notebooks carry no outputs."""
import concurrent.futures, os, pathlib, subprocess, sys, tempfile
import nbformat
from jupyter_client import KernelManager
from nbclient import NotebookClient

root = pathlib.Path(__file__).resolve().parent.parent
path = root / "notebooks" / "baseline.ipynb"
faults_path = root / "notebooks" / "faults.ipynb"
for p, maker in ((path, "make_notebook.py"), (faults_path, "make_faults_notebook.py")):
    for cell in nbformat.read(str(p), as_version=4).cells:
        if cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count")):
            sys.exit(f"{p}: committed with outputs; strip them (regenerate with notebooks/{maker})")

# The committed runs only (git ls-files), never one a user recorded into data/ since.
listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--", "data/*/baseline.json"],
                        check=True, capture_output=True).stdout.decode()
runs = sorted((root / p).parent for p in listed.split("\0") if p)
if not runs:
    sys.exit("no committed run under data/ to execute the notebook on")


def run_kernel(nb_path, figs):
    """Executes a notebook with its kernel on Unix sockets in `figs`, not TCP ports:
    jupyter_client picks free ports by binding and closing them before the kernel binds, so
    two kernels started at once can collide and one dies before kernel_info (regression: a
    CI make test failed that way). A client given its manager leaves the kernel running, so
    this one stops it."""
    nb = nbformat.read(str(nb_path), as_version=4)
    km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(figs, "kernel"))
    try:
        NotebookClient(nb, km=km, timeout=300, resources={"metadata": {"path": str(root / "notebooks")}}).execute()
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)


def execute_faults(sweep):
    """The faults notebook on one committed sweep: None when it drew its figure."""
    with tempfile.TemporaryDirectory() as figs:
        os.environ["SWEEP_DIR"], os.environ["FIG_DIR"] = str(sweep), figs
        run_kernel(faults_path, figs)
        made = sorted(p.name for p in pathlib.Path(figs).glob("fig-*.png"))
        if made != ["fig-fsync-sweep.png"]:
            return f"{sweep.name}: figures {made}, expected fig-fsync-sweep.png"
        print(f"ok: faults notebook on {sweep.relative_to(root)} -> {', '.join(made)}", flush=True)
        return None


def execute(run):
    """One run: None when the notebook ran and made the figures it should, else the error."""
    with tempfile.TemporaryDirectory() as figs:
        os.environ["RUN_DIR"], os.environ["FIG_DIR"] = str(run), figs
        run_kernel(path, figs)
        made = sorted(p.name for p in pathlib.Path(figs).glob("fig-*.png"))
        # fig-zoom.png for every run (the canary lanes in it and in fig-swimlanes.png only
        # when the run has a canary.csv; the notebook prints a note when it has none).
        want = ["fig-counters.png", "fig-swimlanes.png", "fig-waterfall.png", "fig-zoom.png"]
        if (run / "health.csv").exists():  # runs recorded before member health have none
            want = sorted(want + ["fig-health.png"])
        if made != want:
            return f"{run.name}: figures {made}, expected {want}"
        print(f"ok: notebook on {run.relative_to(root)} -> {', '.join(made)}", flush=True)
        return None


# One kernel per core: each run is CPU-bound plotting (66 s for 15 runs one at a time).
if __name__ == "__main__":
    with concurrent.futures.ProcessPoolExecutor(max_workers=max(1, min(2, os.cpu_count() or 1))) as pool:
        errors = [e for e in pool.map(execute, runs) if e]
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--", "data/fault-sweep-*/points.csv"],
                            check=True, capture_output=True).stdout.decode()
    errors += [e for e in map(execute_faults, sorted((root / p).parent for p in listed.split("\0") if p)) if e]
    if errors:
        sys.exit("\n".join(errors))
