"""For scripts that tests run under torchrun: what a rank has left running."""
import os


def os_threads() -> list[str]:
    """The names of this process's OS threads (Linux's /proc; [] elsewhere). A thread that ends
    while they are read is left out: it is no longer there."""
    tasks = "/proc/self/task"
    names = []
    for n in os.listdir(tasks) if os.path.isdir(tasks) else []:
        try:
            with open(f"{tasks}/{n}/comm") as f:
                names.append(f.read().strip())
        except FileNotFoundError:
            pass
    return names
