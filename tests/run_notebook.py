"""make test: executes notebooks/baseline.ipynb headless (nbclient) on every committed run
under data/, and notebooks/faults.ipynb on every committed fault sweep (data/fault-sweep-*,
with the newest data/fault-repeat-*); fails on any cell error or a missing figure, and
checks that the committed notebooks carry no outputs."""
import concurrent.futures, os, pathlib, signal, subprocess, sys, tempfile
import nbformat
from jupyter_client import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

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


class Kernel:
    """One kernel for many executions of the notebooks: each run pays for its cells, not
    for a kernel's start and its imports again (about a third of a run's time). Between
    runs the namespace is reset and every figure closed, so that no run sees another's.
    The kernel talks over Unix sockets in a directory of its own, not TCP ports:
    jupyter_client picks free ports by binding and closing them before the kernel binds,
    so two kernels started at once can collide and one dies before kernel_info
    (regression: a CI make test failed that way)."""

    def __init__(self, client):
        self.client = client

    def execute(self, nb_path, env):
        """Every cell of the notebook, with `env` in the kernel's environment; raises
        CellExecutionError on the first cell that fails."""
        nb = nbformat.read(str(nb_path), as_version=4)
        self.client.nb = nb
        prelude = nbformat.v4.new_code_cell(
            "get_ipython().run_line_magic('reset', '-f')\n"
            "import os, matplotlib.pyplot\n"
            "matplotlib.pyplot.close('all')\n"
            f"os.environ.update({env!r})")
        self.client.execute_cell(prelude, 0)
        for i, cell in enumerate(nb.cells):
            self.client.execute_cell(cell, i)


def check_run(run, figs):
    """The figures one run of the baseline notebook should have made: None, or the error."""
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


def check_sweep(sweep, figs):
    """The faults notebook's figure for one committed sweep: None, or the error."""
    made = sorted(p.name for p in pathlib.Path(figs).glob("fig-*.png"))
    if made != ["fig-fsync-sweep.png"]:
        return f"{sweep.name}: figures {made}, expected fig-fsync-sweep.png"
    print(f"ok: faults notebook on {sweep.relative_to(root)} -> {', '.join(made)}", flush=True)
    return None


def execute_all(jobs):
    """Jobs (notebook, RUN_DIR or SWEEP_DIR variable, directory, check) in one kernel:
    the errors, one line each (a cell's error names the run it failed on)."""
    errors = []
    with tempfile.TemporaryDirectory() as sockets:
        km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(sockets, "kernel"))
        kernels.append(km)
        client = NotebookClient(nbformat.v4.new_notebook(), km=km, timeout=300,
                                resources={"metadata": {"path": str(root / "notebooks")}})
        # setup_kernel starts the kernel and, as the client was given its manager, leaves
        # it running on the way out: stopped here.
        try:
            with client.setup_kernel():
                kernel = Kernel(client)
                for nb_path, var, d, check in jobs:
                    with tempfile.TemporaryDirectory() as figs:
                        try:
                            kernel.execute(nb_path, {var: str(d), "FIG_DIR": figs})
                        except CellExecutionError as e:
                            errors.append(f"{d.name}: {nb_path.name} failed: {e}")
                            continue
                        err = check(d, figs)
                        if err:
                            errors.append(err)
        finally:
            if km.has_kernel:
                km.shutdown_kernel(now=True)
    return errors


# This worker's kernels, for the signal handler below.
kernels = []


def stop_kernels_on_signal():
    """A pool worker: on SIGTERM or SIGINT, kill its kernel's process group and exit.
    jupyter_client starts each kernel in a session of its own, which a signal to the
    test's process group does not reach; and an exception raised here would not unwind
    the worker (the pool hands it back as the task's result and waits for more)."""
    def stop(sig, _frame):
        for km in kernels:
            try:
                os.killpg(km.provisioner.process.pid, signal.SIGKILL)
            except (AttributeError, OSError):
                pass  # not started, or gone already
        os._exit(128 + sig)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)


# One kernel per core, each taking every other run: the runs are CPU-bound plotting.
if __name__ == "__main__":
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--", "data/fault-sweep-*/points.csv"],
                            check=True, capture_output=True).stdout.decode()
    sweeps = sorted((root / p).parent for p in listed.split("\0") if p)
    jobs = [(path, "RUN_DIR", r, check_run) for r in runs]
    jobs += [(faults_path, "SWEEP_DIR", s, check_sweep) for s in sweeps]
    workers = max(1, min(2, os.cpu_count() or 1))
    pool = concurrent.futures.ProcessPoolExecutor(max_workers=workers, initializer=stop_kernels_on_signal)

    def stop(sig, _frame):
        # The workers stop their kernels on the way out; then this process goes.
        procs = list((pool._processes or {}).values())
        for p in procs:
            p.terminate()
        for p in procs:
            p.join(timeout=10)
        os._exit(128 + sig)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with pool:
        errors = [e for errs in pool.map(execute_all, [jobs[i::workers] for i in range(workers)]) for e in errs]
    if errors:
        sys.exit("\n".join(errors))
