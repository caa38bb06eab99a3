# A program that fails the way torchrun users see failures: an exception
# raised inside a function under torch's @record, which writes it as JSON to
# $TORCHELASTIC_ERROR_FILE before the process exits 1.
import os
from torch.distributed.elastic.multiprocessing.errors import record


def step(i):
    raise ValueError("loss is nan at step %d (ec15)" % i)


@record
def main():
    step(int(os.environ.get("RANK", "0")) + 7)


if __name__ == "__main__":
    main()
